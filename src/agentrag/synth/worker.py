"""What every synthesizer needs to run its per-item work in worker processes (the Ray executor).

A run's components (LLMs, KB, embedder ...) hold live clients and cannot travel to another
process. Instead each pipeline's components carry a ``rebuild`` recipe (:class:`ComponentsRecipe`):
a small picklable object (a dataclass of LLM references, a KB directory, the run directory ...)
whose call builds the same components again. :class:`ComponentsTask` is the per-item function handed to the executor: in
the driver's process it uses the driver's components; unpickled in a worker process it builds
them with the recipe on its first item, once per process for all stages of a run
(:func:`build_once`). :func:`resolve_role_llms` resolves LLM references the way every recipe
does: one client per distinct reference, on the run's LLM cache (:func:`agentrag.llm.cache.worker_cache_path`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentrag.errors import UserError
from agentrag.exec import WorkerTask

C = TypeVar("C")
C_co = TypeVar("C_co", covariant=True)


class ComponentsRecipe(Protocol[C_co]):
    """The one signature of every synthesizer's components recipe (``<Name>Recipe``): plain data
    (references, directories; it pickles to worker processes) whose call builds the run's
    components. ``kb`` (a KB or retriever) and ``llms`` (``{role: LLM}``) are objects a Python
    caller passed; they replace what the recipe's references would resolve to. A worker process
    calls it with no argument."""

    def __call__(self, kb: Any = None, llms: Mapping[str, Any] | None = None) -> C_co: ...



_BUILT: dict[str, Any] = {}  # per worker process: components by their recipe
_BUILT_LOCK = threading.Lock()


def build_once(recipe: Callable[[], C]) -> C:
    """``recipe()``, built once per process and recipe (equal recipes share one build)."""
    key = f"{type(recipe).__module__}.{type(recipe).__qualname__}:{recipe!r}"
    with _BUILT_LOCK:
        if key not in _BUILT:
            _BUILT[key] = recipe()
        return _BUILT[key]  # type: ignore[no-any-return]


def resolve_role_llms(refs: dict[str, str], run_dir: str | Path | None) -> dict[str, Any]:
    """``{role: LLM}`` for ``{role: reference}``: one client per distinct reference, all on the
    run's LLM cache (or the node-local one of ``AGENTRAG_WORKER_CACHE_DIR``)."""
    from agentrag.llm import resolve_llm
    from agentrag.llm.cache import worker_cache_path

    cache = worker_cache_path(Path(run_dir) / "llm_cache.sqlite") if run_dir is not None else None
    by_ref = {ref: resolve_llm(ref, cache=cache) for ref in dict.fromkeys(refs.values())}
    return {role: by_ref[ref] for role, ref in refs.items()}


class ComponentsTask(WorkerTask):
    """``fn(components, item)`` as a picklable per-item function.

    ``fn`` must pickle without live objects: a module-level function, or a ``functools.partial``
    of one over plain data (a config, a dict of records). ``comps`` (the driver's components) is
    the state in the driver's process and is never pickled; ``rebuild`` rebuilds it elsewhere.
    """

    def __init__(self, fn: Callable[[Any, Any], Any], comps: Any, rebuild: Callable[[], Any] | None,
                 what: str = "components") -> None:
        super().__init__()
        self.fn, self.rebuild, self.what = fn, rebuild, what
        self._state = comps

    def setup(self) -> Any:
        if self.rebuild is None:
            raise UserError(f"{self.what} cannot be rebuilt in a worker process: give the components a "
                            "rebuild recipe (rebuild=...) to run on a distributed executor")
        return build_once(self.rebuild)

    def run(self, state: Any, item: Any) -> Any:
        return self.fn(state, item)


__all__ = ["ComponentsRecipe", "ComponentsTask", "build_once", "resolve_role_llms"]
