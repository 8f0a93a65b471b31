"""Stages that overlap: an item's next stage starts as soon as its own record is written.

A pipeline whose stage B needs, per item, only that item's record of stage A (EviPath's
selections after the item's path; Tracer's hop k+1 after the same chain's hop k) need not wait
for the whole of A: :func:`run_flow` runs the stages through one executor map. The driver writes
each result (``writers[stage](item, result)``, in its own thread, the only writer) and the writer
returns the follow-up tasks ``[(stage, item), ...]`` the result makes possible; they queue behind
the tasks queued before them (first in, first out, so what is left at the end is the last tasks
of many items, not the whole chain of the items started last) — until :func:`follow_up_bound`
follow-ups wait: then follow-ups go first, so the tasks waiting (each holding its item's records)
stay bounded however many items the flow has, instead of one follow-up per item. The executor (thread or Ray: both pull their items lazily up to their
in-flight limit) keeps its slots busy while any stage has work: no stage waits for the previous
stage's slowest item.

A real barrier — a stage that needs every record of the previous one (RAGShaper's distractor KB,
Tracer's sampling by type quota) — stays a separate :meth:`~agentrag.synth.driver.SynthRun.stage`.

The failure policy is :func:`agentrag.exec.policy.settle_failure`'s, per task, tallied in the
task's own stage: a fatal error is raised at once (what has not started is cancelled), an outage
or a lost worker leaves the item unfinished in that stage, any other exception is a bug; a failed
task gets no follow-up. Resume stays the pipeline's: its writers append records keyed by id, and
the stages run again afterwards (as plain stages) pick up whatever is still pending.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from agentrag.exec.base import Executor
from agentrag.exec.policy import StageResult, item_key, settle_failure
from agentrag.progress import Progress

#: a task of a flow: (stage name, the item of that stage)
Task = tuple[str, Any]
#: writes one result of a stage; returns the follow-up tasks it makes possible (or None)
Writer = Callable[[Any, Any], Iterable[Task] | None]


class Dispatch:
    """The per-task function of a flow: runs ``fns[stage]`` on the item (picklable when the stage
    functions are, so a Ray executor ships it once per map)."""

    def __init__(self, fns: Mapping[str, Callable[[Any], Any]]) -> None:
        self.fns = dict(fns)

    def __call__(self, task: Task) -> Any:
        stage, item = task
        return self.fns[stage](item)


class Feed:
    """The tasks an executor pulls from: the first tasks in order, a follow-up (:meth:`push`)
    behind every task queued before it (first in, first out) while fewer than ``hold`` follow-ups
    wait, ahead of the first tasks once ``hold`` do (so at most about ``hold`` follow-ups are ever
    held). An empty feed stops the pull for now and gives again once something is pushed."""

    def __init__(self, items: Iterable[Task] = (), hold: int | None = None) -> None:
        self.queue: deque[Task] = deque(items)
        self.follow: deque[Task] = deque()
        self.hold = hold

    def __iter__(self) -> Iterator[Task]:
        return self

    def __len__(self) -> int:
        return len(self.queue) + len(self.follow)

    def __next__(self) -> Task:
        if self.follow and (not self.queue or len(self.follow) >= (self.hold or 0)):
            return self.follow.popleft()
        if self.queue:
            return self.queue.popleft()
        raise StopIteration

    def push(self, task: Task) -> None:
        if self.hold is None:  # strictly first in, first out: one queue
            self.queue.append(task)
        else:
            self.follow.append(task)


def follow_up_bound(executor: Executor) -> int:
    """How many follow-up tasks a flow lets wait before it runs them ahead of new items: four times
    the executor's in-flight limit, at least 32 (enough to keep every slot busy at the end, small
    against a run of thousands of items)."""
    limit = getattr(executor, "max_in_flight", None) or 2 * max(1, int(getattr(executor, "workers", 1) or 1))
    return max(32, 4 * int(limit))


def _key(task: Task) -> str:
    return item_key(task[1])


def run_flow(executor: Executor, fns: Mapping[str, Callable[[Any], Any]], writers: Mapping[str, Writer],
             first: Iterable[Task], *, progress: Progress | None = None,
             hold: int | None = None) -> dict[str, StageResult]:
    """Run the tasks ``first`` and every follow-up their writers return (module docstring) under
    the failure policy; returns one :class:`StageResult` per stage of ``fns``. ``hold``: how many
    follow-ups may wait before they go first (:class:`Feed`; default :func:`follow_up_bound`)."""
    res = {name: StageResult(stage=name) for name in fns}
    queued = dict.fromkeys(fns, 0)
    feed = Feed(first, hold=follow_up_bound(executor) if hold is None else hold)
    for stage, _ in feed.queue:
        queued[stage] += 1
    if progress:  # every stage with work says it started before its first item finishes
        for stage, n in queued.items():
            if n:
                progress(stage, 0, n)
    fn = Dispatch(fns)
    while len(feed):  # one pass normally; again only if an executor stopped pulling early
        stream = executor.map(fn, feed)
        try:
            for out in stream:
                stage = out.item[0]
                r = res[stage]
                r.total += 1
                if out.error is not None:
                    settle_failure(r, out.item, out.error, _key)
                else:
                    r.done += 1
                    grown = set()
                    for nxt in writers[stage](out.item[1], out.result) or ():
                        queued[nxt[0]] += 1
                        feed.push(nxt)
                        grown.add(nxt[0])
                    if progress:  # a follow-up stage's total grows (its first task: its start line)
                        for other in grown - {stage}:
                            progress(other, res[other].total, queued[other])
                if progress:
                    progress(stage, r.total, queued[stage])
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
    return res


__all__ = ["Dispatch", "Feed", "Task", "Writer", "follow_up_bound", "run_flow"]
