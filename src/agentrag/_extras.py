"""Lazy imports of optional dependencies, with an error that names the extra to install.

Heavy libraries (faiss, bm25s, sentence-transformers, llama.cpp, transformers, TRL, FastAPI ...)
are imported only where they are used, through :func:`require`, so ``import agentrag`` stays
light and a missing one says which ``pip install 'agentrag[EXTRA]'`` brings it.
"""

from __future__ import annotations

import importlib
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


__all__ = ["require", "DISTRIBUTIONS"]
