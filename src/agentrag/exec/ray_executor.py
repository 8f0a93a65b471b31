"""The Ray executor: per-item work on a pool of Ray actors, results streamed back as they finish.

Each actor is one worker process holding the (cloud)pickled per-item function; a
:class:`~agentrag.exec.WorkerTask` therefore builds its LLM, KB and agent once per worker
process, on its first item. An actor runs up to ``threads`` items at a time (threaded actor), so
I/O-bound items (an OpenAI-compatible endpoint) overlap inside one process as in the thread
executor, while CPU-bound items (the embedded model) use ``threads=1`` and one actor per core.

Failures: an exception raised by the function comes back as the item's ``Outcome.error`` (the
original exception, as in the thread executor). A worker process that dies (killed, OOM,
segfault) is restarted by Ray (without limit) and its in-flight items are retried there
(``retries`` times each);
after that budget the item comes back with a retryable :class:`~agentrag.errors.RunError`, so the
driver leaves it unfinished and the next run redoes it. The driver stays the only writer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from agentrag.errors import RunError, UserError
from agentrag.exec.base import Outcome

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UserError("--executor ray needs Ray: pip install 'agentrag[ray]'") from exc
    return ray


class WorkerLost(RunError):
    """A Ray worker died while running the item, more often than the retry budget allows."""


def _item_worker_class(ray: Any) -> Any:
    import threading

    class ItemWorker:
        """One worker process, kept for the executor's life: loads each map's function once (from
        the object store) and runs items on it."""

        def __init__(self) -> None:
            self.fns: dict[int, Any] = {}
            self.lock = threading.Lock()

        def pid(self) -> int:
            return os.getpid()

        def _fn(self, key: int, blob_ref: list[Any]) -> Any:
            with self.lock:
                if key not in self.fns:
                    import cloudpickle

                    self.fns = {key: cloudpickle.loads(ray.get(blob_ref[0]))}  # only the current map's
                return self.fns[key]

        def run(self, key: int, blob_ref: list[Any], item: Any) -> tuple[bool, Any]:
            try:
                return True, self._fn(key, blob_ref)(item)
            except Exception as exc:  # noqa: BLE001 - shipped back to the driver as the Outcome's error
                return False, exc

    return ray.remote(ItemWorker)


class RayExecutor:
    """``workers`` Ray actors (worker processes), each running up to ``threads`` items at a time.

    ``address=None`` starts a local Ray instance with ``num_cpus=workers`` (shut down by
    :meth:`close`); an address (``auto``, ``ray://host:10001``, ``host:6379``) attaches to a running
    cluster. ``retries`` is how often an item whose worker died is retried; ``max_in_flight``
    (default ``2 * workers * threads``) bounds the items submitted at a time.
    """

    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, *, threads: int = 1, retries: int = 2,
                 max_in_flight: int | None = None, num_cpus_per_worker: float | None = None) -> None:
        if workers < 1 or threads < 1:
            raise UserError(f"ray executor: workers={workers!r} and threads={threads!r} must be at least 1")
        self.workers, self.threads, self.retries, self.address = workers, threads, retries, address
        self.max_in_flight = max_in_flight or 2 * workers * threads
        self.num_cpus_per_worker = num_cpus_per_worker
        self.gather_s = 0.02
        self._ray = _ray()
        self._started = False
        self._pool: list[Any] = []
        self._maps = 0
        self.worker_pids: list[int] = []

    def __repr__(self) -> str:
        return f"RayExecutor(workers={self.workers}, threads={self.threads}, address={self.address!r})"

    # --- cluster ------------------------------------------------------------------------------
    def _connect(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
        if self.address:
            ray.init(address=self.address, **kwargs)
            log.info("attached to the Ray cluster at %s", self.address)
        else:
            ray.init(num_cpus=self.workers, **kwargs)
            log.info("started a local Ray instance with %d CPUs", self.workers)
        self._started = True

    def close(self) -> None:
        """Stop the workers, and the Ray instance this executor started (an attached cluster keeps
        running)."""
        if self._pool and self._ray.is_initialized():
            for a in self._pool:
                self._ray.kill(a, no_restart=True)
        self._pool = []
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _actors(self) -> list[Any]:
        """The worker pool, started on the first map and kept (a process start costs seconds)."""
        if self._pool:
            return self._pool
        ray = self._ray
        if self.num_cpus_per_worker is not None:
            cpus = self.num_cpus_per_worker
        else:  # one CPU per worker on a local instance; on a cluster let them pack anywhere
            cpus = 1 if not self.address else 0.001
        cls = _item_worker_class(ray).options(
            num_cpus=cpus, max_restarts=-1, max_task_retries=self.retries,
            max_concurrency=self.threads)
        self._pool = [cls.remote() for _ in range(self.workers)]
        self.worker_pids = list(ray.get([a.pid.remote() for a in self._pool]))
        return self._pool

    # --- map ----------------------------------------------------------------------------------
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[Outcome[T, R]]:
        self._connect()
        ray = self._ray
        import cloudpickle

        actors = self._actors()
        self._maps += 1
        key, blob = self._maps, [ray.put(cloudpickle.dumps(fn))]  # in a list: Ray passes the ref as is
        load = dict.fromkeys(range(len(actors)), 0)
        queue = iter(items)
        running: dict[Any, tuple[T, int]] = {}
        try:
            while True:
                while len(running) < self.max_in_flight:
                    nxt = next(queue, _END)
                    if nxt is _END:
                        break
                    slot = min(load, key=load.__getitem__)  # least-loaded worker
                    load[slot] += 1
                    running[actors[slot].run.remote(key, blob, nxt)] = (nxt, slot)  # type: ignore[assignment]
                if not running:
                    break
                refs = list(running)
                # every round trip to Ray costs milliseconds (tens on a loaded machine): collect all
                # items finished within a short window at once, and fetch them in one call
                done, _ = ray.wait(refs, num_returns=len(refs), timeout=self.gather_s)
                if not done:
                    done, _ = ray.wait(refs, num_returns=1)
                values = self._get_many(done)  # one round trip for every finished item
                for ref, value in zip(done, values, strict=True):
                    item, slot = running.pop(ref)
                    load[slot] -= 1
                    yield self._outcome(ref, item) if value is _FAILED else self._unpack(item, value)
        finally:
            for ref in running:
                ray.cancel(ref)

    def _get_many(self, refs: list[Any]) -> list[Any]:
        """The values of finished ``refs``; ``_FAILED`` marks those to fetch one by one (a lost worker)."""
        ray = self._ray
        try:
            return list(ray.get(refs))
        except ray.exceptions.RayError:
            return [_FAILED] * len(refs)

    @staticmethod
    def _unpack(item: T, value: tuple[bool, Any]) -> Outcome[T, R]:
        ok, res = value
        return Outcome(item, result=res) if ok else Outcome(item, error=res)

    def _outcome(self, ref: Any, item: T) -> Outcome[T, R]:
        ray = self._ray
        try:
            ok, value = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            log.warning("a Ray worker died running an item (retried %d times); left unfinished for the "
                        "next run: %s", self.retries, exc)
            return Outcome(item, error=WorkerLost(f"Ray worker lost: {exc}", is_retryable=True))
        except ray.exceptions.RayError as exc:
            return Outcome(item, error=WorkerLost(f"Ray task failed: {exc}", is_retryable=True))
        return self._unpack(item, (ok, value))


_END = object()
_FAILED = object()

__all__ = ["RayExecutor", "WorkerLost"]
