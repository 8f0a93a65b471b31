"""Lazy imports of optional dependencies, with an error that names the extra to install.

Heavy libraries (faiss, bm25s, sentence-transformers, llama.cpp, transformers, TRL, FastAPI ...)
are imported only where they are used, through :func:`require`, so ``import agentrag`` stays
light and a missing one says which ``pip install 'agentrag[EXTRA]'`` brings it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from agentrag.errors import UserError

# import name -> distribution name on PyPI, where they differ
DISTRIBUTIONS = {
    "faiss": "faiss-cpu",
    "sentence_transformers": "sentence-transformers",
    "llama_cpp": "llama-cpp-python",
    "Stemmer": "PyStemmer",
}


def require(module: str, extra: str, *, purpose: str = "") -> ModuleType:
    """Import ``module`` (e.g. ``"faiss"`` or ``"bm25s.tokenization"``) or raise a ``UserError``
    naming the package and the extra: ``... needs faiss-cpu: pip install 'agentrag[kb]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        dist = DISTRIBUTIONS.get(top, top)
        what = purpose or f"this feature (module {module!r})"
        detail = "" if isinstance(exc, ModuleNotFoundError) and exc.name in (top, module) else f" ({exc})"
        raise UserError(f"{what} needs {dist}{detail}: pip install 'agentrag[{extra}]'") from exc


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Loading a transformers / sentence-transformers model prints a "Loading weights" bar per
    model; agentrag reports its own progress, so inside this block those bars are off, from the
    CLI and from Python alike, unless the user asked for them (``HF_HUB_DISABLE_PROGRESS_BARS=0``).
    The previous setting is restored afterwards."""
    if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "0":
        yield
        return
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # no transformers: nothing prints these bars
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


__all__ = ["require", "quiet_loading", "DISTRIBUTIONS"]
