"""The failure policy applied to per-item work, in one home (see :func:`agentrag.errors.classify`).

:func:`run_stage` maps a per-item function over items on an executor and sorts every failure:

- ``outage`` (after the backend's retries) and a lost worker: the item is unfinished, nothing is
  written for it, the next run redoes it;
- ``fatal`` (401/403/404, unknown model, unwritable run directory, bad input): the stage stops at
  once (items not started are cancelled) and the error is raised; nothing more is written;
- ``model_limited`` escaping the per-item function: a stage is expected to turn it into a flagged
  record itself, so reaching here it is handled like a bug;
- ``bug`` (anything else): logged with its traceback, the item stays unfinished, the stage goes on;
  the command then exits non-zero (:attr:`StageResult.bugs`).

Eval and every synthesizer call it; it is the only place that decides what a failure means.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentrag.errors import AgentRagError, classify
from agentrag.exec.base import Executor
from agentrag.progress import Progress

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class StageResult:
    """What happened to the items of one stage (or one eval) in this invocation."""

    stage: str = ""
    total: int = 0
    done: int = 0
    #: item key -> "ErrorClass: message" for items left unfinished by an outage or a lost worker
    unfinished: dict[str, str] = field(default_factory=dict)
    #: item key -> "ErrorClass: message" for items that raised a bug (also unfinished)
    bugs: dict[str, str] = field(default_factory=dict)

    def merge(self, other: StageResult) -> StageResult:
        self.total += other.total
        self.done += other.done
        self.unfinished.update(other.unfinished)
        self.bugs.update(other.bugs)
        return self


class ItemBugs(AgentRagError):
    """Some items raised an unexpected exception (a bug; tracebacks in the log); they stay
    unfinished. Raised by a run after its ``metrics.json`` and report are written (the CLI exits 1);
    ``bugs`` maps item keys to the errors, ``metrics`` is the run's metrics object when it has one."""

    def __init__(self, bugs: Mapping[str, str], metrics: dict[str, Any] | None = None) -> None:
        key, why = next(iter(bugs.items()))
        super().__init__(f"{len(bugs)} item(s) failed with an unexpected error (a bug; tracebacks in the log), "
                         f"e.g. {key}: {why}")
        self.bugs, self.metrics = dict(bugs), metrics


def item_key(item: Any) -> str:
    """A readable key of a work item: its ``id``, or the ``id`` of its first element (a tuple task)."""
    for obj in (item, item[0] if isinstance(item, tuple) and item else None):
        key = getattr(obj, "id", None)
        if isinstance(key, str):
            return key
    return repr(item)[:60]


def settle_failure(res: StageResult, item: Any, error: BaseException, key: Callable[[Any], str] = item_key) -> None:
    """The policy for one item whose work raised ``error``: a fatal error is raised; an outage is
    noted in ``res.unfinished``; anything else is a bug, logged with its traceback, in ``res.bugs``."""
    kind = classify(error)
    why = f"{type(error).__name__}: {error}"
    if kind == "fatal":
        raise error
    if kind == "outage":
        log.warning("%s: item %s unfinished (%s); rerun the same command to redo it", res.stage or "run", key(item),
                    why)
        res.unfinished[key(item)] = why
    else:
        log.error("%s: item %s failed with a bug; it stays unfinished", res.stage or "run", key(item),
                  exc_info=(type(error), error, error.__traceback__))
        res.bugs[key(item)] = why


def run_stage(executor: Executor, fn: Callable[[T], R], items: Iterable[T], *, stage: str = "",
              progress: Progress | None = None,
              on_result: Callable[[T, R], object] | None = None,
              key: Callable[[T], str] = item_key) -> StageResult:
    """Run ``fn`` over ``items`` under the failure policy (module docstring); ``on_result`` (in
    the driver's thread, the only writer) writes each result; ``progress(stage, done, total)``
    follows the items. A fatal error is raised at once, after cancelling what had not started."""
    todo = list(items)
    res = StageResult(stage=stage, total=len(todo))
    if progress:
        progress(stage, 0, len(todo))
    stream = executor.map(fn, todo)
    try:
        for n, out in enumerate(stream, start=1):
            if out.error is None:
                if on_result is not None:
                    on_result(out.item, out.result)  # type: ignore[arg-type]
                res.done += 1
            else:
                settle_failure(res, out.item, out.error, key)
            if progress:
                progress(stage, n, len(todo))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # cancels the items not started (thread executor) / in flight (Ray)
    return res


__all__ = ["StageResult", "run_stage", "settle_failure", "item_key", "ItemBugs"]
