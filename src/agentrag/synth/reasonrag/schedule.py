"""Questions that advance independently: a stage whose items come back with a follow-up task.

The MCTS of a question runs as a chain of tasks of ``batch`` iterations each (the driver writes
each task's events before the next one starts, so a kill loses at most the tasks in flight). A
round-based loop (one executor map per round) makes every question wait for the slowest one of
its round. :func:`run_chained` instead hands the executor a :class:`Refill` feed: when a task
returns, the driver writes its result and queues the question's next task at once, and the
executor (thread or Ray: both pull their items lazily, up to their in-flight limit) submits it on
its next pull, so the executor's slots stay busy while any question has work left.

The failure policy is :func:`agentrag.exec.run_stage`'s (:func:`~agentrag.exec.policy.settle_failure`), applied per task: a fatal error is raised
at once (what has not started is cancelled), an outage or a lost worker leaves the question
unfinished, any other exception is a bug (logged, unfinished); such a question gets no follow-up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from agentrag.exec import StageResult
from agentrag.exec.policy import settle_failure
from agentrag.synth.driver import SynthRun

T = TypeVar("T")
R = TypeVar("R")


class Refill(Generic[T]):
    """An item feed an executor pulls from: ``next`` gives a queued item or stops for now; an
    item :meth:`put` later is given on the executor's next pull (a plain iterator would stay
    exhausted; this one refills)."""

    def __init__(self, items: Iterable[T] = ()) -> None:
        self.queue: deque[T] = deque(items)

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self.queue:
            return self.queue.popleft()
        raise StopIteration

    def put(self, item: T) -> None:
        self.queue.append(item)


def run_chained(ctx: SynthRun, name: str, fn: Callable[[T], R], first: Iterable[T],
                on_result: Callable[[T, R], T | None]) -> StageResult:
    """Run ``fn`` over ``first`` and over every follow-up task ``on_result`` returns (``None``:
    that chain is finished), through ``ctx.executor`` under the failure policy (module docstring);
    the outcome is merged into ``ctx.results[name]`` like :meth:`SynthRun.stage`'s."""
    res = StageResult(stage=name)
    feed: Refill[T] = Refill(first)
    while feed.queue:  # one pass normally; again only if an executor stopped pulling early
        stream = ctx.executor.map(fn, feed)
        try:
            for out in stream:
                res.total += 1
                if out.error is not None:
                    settle_failure(res, out.item, out.error)
                    continue
                res.done += 1
                nxt = on_result(out.item, out.result)  # type: ignore[arg-type]
                if nxt is not None:
                    feed.put(nxt)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
    ctx.results.setdefault(name, StageResult(stage=name)).merge(res)
    return res


__all__ = ["Refill", "run_chained"]
