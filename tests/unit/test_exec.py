"""The executor seam: every item comes back once, errors are handed to the driver, pickling."""

from __future__ import annotations

import pickle
import threading

import pytest

from agentrag.errors import UserError
from agentrag.exec import Outcome, ThreadExecutor, WorkerTask, resolve_executor, run_stage


@pytest.mark.parametrize("workers", [1, 3])
def test_every_item_once_and_errors_in_outcomes(workers: int) -> None:
    def fn(x: int) -> int:
        if x % 7 == 3:
            raise ValueError(f"bad {x}")
        return x * x

    outs = list(ThreadExecutor(workers).map(fn, range(50)))
    assert sorted(o.item for o in outs) == list(range(50))
    for o in outs:
        if o.item % 7 == 3:
            assert not o.ok and isinstance(o.error, ValueError) and o.result is None
        else:
            assert o.ok and o.result == o.item * o.item


def test_inline_executor_keeps_order_and_thread() -> None:
    caller = threading.get_ident()
    outs = list(ThreadExecutor(1).map(lambda x: (x, threading.get_ident()), [3, 1, 2]))
    assert [o.item for o in outs] == [3, 1, 2]
    assert all(o.result[1] == caller for o in outs)  # type: ignore[index]


def test_bounded_in_flight() -> None:
    started: list[int] = []
    gate = threading.Event()

    def fn(x: int) -> int:
        started.append(x)
        gate.wait(5)
        return x

    ex = ThreadExecutor(2)
    it = ex.map(fn, range(100))
    t = threading.Timer(0.3, gate.set)
    t.start()
    first = next(it)
    assert len(started) <= 4 + 2  # at most 2*workers submitted before the first result (+ refill)
    rest = list(it)
    assert len(rest) + 1 == 100 and isinstance(first, Outcome)


def test_run_stage_writes_in_driver_and_reports_progress() -> None:
    written: list[tuple[int, int]] = []
    progress: list[tuple[str, int, int]] = []
    driver = threading.get_ident()
    threads: set[int] = set()

    def write(item: int, res: int) -> None:
        threads.add(threading.get_ident())
        written.append((item, res))

    res = run_stage(ThreadExecutor(3), lambda x: 1 // (x - 5), range(10), stage="s",
                    progress=lambda *a: progress.append(a), on_result=write, key=str)
    assert list(res.bugs) == ["5"] and "ZeroDivisionError" in res.bugs["5"] and res.done == 9
    assert sorted(i for i, _ in written) == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert threads == {driver}
    assert progress[0] == ("s", 0, 10) and progress[-1] == ("s", 10, 10)


class _Task(WorkerTask):
    setups = 0

    def __init__(self, offset: int) -> None:
        super().__init__()
        self.offset = offset

    def setup(self) -> dict[str, int]:
        type(self).setups += 1
        return {"offset": self.offset}

    def run(self, state: dict[str, int], item: int) -> int:
        return item + state["offset"]


def test_worker_task_builds_state_once_and_pickles_without_it() -> None:
    task = _Task(10)
    outs = list(ThreadExecutor(4).map(task, range(20)))
    assert sorted(o.result for o in outs) == [i + 10 for i in range(20)]  # type: ignore[misc]
    assert _Task.setups == 1
    clone = pickle.loads(pickle.dumps(task))
    assert clone._state is None and clone(1) == 11 and _Task.setups == 2


def test_resolve_executor_errors() -> None:
    assert resolve_executor("thread", 3).workers == 3
    with pytest.raises(UserError, match="unknown executor"):
        resolve_executor("dask")
    with pytest.raises(UserError, match="at least 1"):
        ThreadExecutor(0)
