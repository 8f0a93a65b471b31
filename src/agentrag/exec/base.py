"""Executor protocol, the thread executor, and the per-worker task helper (see the package doc)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agentrag.errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")

R = TypeVar("R")

_in_flight = 0
_in_flight_lock = threading.Lock()


def items_in_flight() -> int:
    """Items a :class:`ThreadExecutor` is running now, over all its maps (what Ctrl-C abandons)."""
    return _in_flight


def _add_in_flight(n: int) -> None:
    global _in_flight
    with _in_flight_lock:
        _in_flight += n


@dataclass
class Outcome(Generic[T, R]):
    """One finished item: its ``result``, or the ``error`` its function raised."""

    item: T
    result: R | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    """Maps ``fn`` over ``items``; yields one :class:`Outcome` per item in completion order."""

    name: str
    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[Outcome[T, R]]: ...


class ThreadExecutor:
    """A thread pool in this process. ``workers=1`` runs the items inline, in order (no threads).

    At most ``2 * workers`` items are in flight, so a long item list is not materialized as
    futures and an interrupt (Ctrl-C) cancels what has not started.
    """

    name = "thread"

    def __init__(self, workers: int = 4) -> None:
        if workers < 1:
            raise UserError(f"executor workers={workers!r} must be at least 1")
        self.workers = workers

    def __repr__(self) -> str:
        return f"ThreadExecutor(workers={self.workers})"

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[Outcome[T, R]]:
        if self.workers == 1:
            for it in items:
                _add_in_flight(1)
                try:
                    res = fn(it)
                except Exception as exc:  # noqa: BLE001 - handed to the driver in the Outcome
                    _add_in_flight(-1)
                    yield Outcome(it, error=exc)
                except BaseException:
                    _add_in_flight(-1)
                    raise
                else:
                    _add_in_flight(-1)
                    yield Outcome(it, result=res)
            return
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="agentrag-exec")
        queue = iter(items)
        running: dict[Future[R], T] = {}
        try:
            while True:
                while len(running) < 2 * self.workers:
                    nxt: Any = next(queue, _END)
                    if nxt is _END:
                        break
                    running[pool.submit(fn, nxt)] = nxt
                    _add_in_flight(1)
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    it = running.pop(fut)
                    _add_in_flight(-1)
                    error = fut.exception()
                    yield Outcome(it, error=error) if error is not None else Outcome(it, result=fut.result())
        finally:
            # stopped early (a fatal error, Ctrl-C): cancel what has not started and do not wait
            # for the items in flight; their results are never written
            for fut in running:
                fut.cancel()
            _add_in_flight(-len(running))
            pool.shutdown(wait=not running, cancel_futures=True)


_END = object()


class WorkerTask:
    """Base for picklable per-item functions that build heavy state once per worker process.

    Subclasses keep only plain data (a resolved config as a dict) as attributes and implement
    :meth:`setup` (build LLM, KB, agent ... from that data) and :meth:`run` (one item). The state
    is built lazily on the first call in each process and cached per task instance; the
    thread executor shares one state across its threads.
    """

    def __init__(self) -> None:
        self._state: Any = None
        self._state_lock = threading.Lock()

    def setup(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def run(self, state: Any, item: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def state(self) -> Any:
        if self._state is None:
            with self._state_lock:
                if self._state is None:
                    self._state = self.setup()
        return self._state

    def __call__(self, item: Any) -> Any:
        return self.run(self.state(), item)

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_state"], d["_state_lock"] = None, None
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._state_lock = threading.Lock()
