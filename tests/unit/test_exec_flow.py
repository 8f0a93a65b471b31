"""Stages that overlap (agentrag.exec.run_flow, SynthRun.flow): an item's next stage starts as
soon as its own record is written, under the same failure policy per stage."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentrag.errors import EndpointError, LLMError
from agentrag.exec import ThreadExecutor, run_flow
from agentrag.exec.flow import Feed, follow_up_bound


class Item:
    def __init__(self, id: str, slow: float = 0.0) -> None:
        self.id, self.slow = id, slow


def test_a_follow_up_starts_before_the_slowest_item_of_the_previous_stage_ends() -> None:
    events: list[str] = []
    lock = threading.Lock()

    def first(it: Item) -> str:
        time.sleep(it.slow)
        with lock:
            events.append(f"a:{it.id}")
        return it.id

    def second(it: Item) -> str:
        with lock:
            events.append(f"b:{it.id}")
        return it.id.upper()

    written: dict[str, list[str]] = {"a": [], "b": []}

    def write_a(it: Item, got: str) -> list[tuple[str, Any]]:
        written["a"].append(got)
        return [("b", it)]

    def write_b(_it: Item, got: str) -> None:
        written["b"].append(got)

    items = [Item("fast"), Item("slow", 0.3)]
    res = run_flow(ThreadExecutor(2), {"a": first, "b": second}, {"a": write_a, "b": write_b},
                   [("a", it) for it in items])
    # the fast item's second stage ran while the slow item's first stage was still running
    assert events.index("b:fast") < events.index("a:slow"), events
    assert sorted(written["a"]) == ["fast", "slow"] and sorted(written["b"]) == ["FAST", "SLOW"]
    assert (res["a"].total, res["a"].done, res["b"].total, res["b"].done) == (2, 2, 2, 2)


def test_failures_are_tallied_in_their_own_stage_and_get_no_follow_up() -> None:
    def first(it: Item) -> str:
        if it.id == "down":
            raise LLMError("HTTP 503", is_retryable=True)
        return it.id

    def second(it: Item) -> str:
        if it.id == "buggy":
            raise KeyError("oops")
        return it.id

    followed: list[str] = []

    def write_a(it: Item, _got: str) -> list[tuple[str, Any]]:
        followed.append(it.id)
        return [("b", it)]

    res = run_flow(ThreadExecutor(2), {"a": first, "b": second}, {"a": write_a, "b": lambda _i, _g: None},
                   [("a", Item(k)) for k in ("ok", "down", "buggy")])
    assert sorted(followed) == ["buggy", "ok"]  # the outage got no follow-up
    assert list(res["a"].unfinished) == ["down"] and not res["a"].bugs
    assert list(res["b"].bugs) == ["buggy"] and not res["b"].unfinished
    assert (res["a"].done, res["b"].done) == (2, 1)


def test_a_fatal_error_in_a_later_stage_is_raised_and_writes_nothing_of_it() -> None:
    def first(it: Item) -> str:
        time.sleep(0.01)
        return it.id

    def second(it: Item) -> str:
        raise EndpointError("401 from http://llm: check the key", status=401)

    written: list[str] = []

    def write_a(it: Item, got: str) -> list[tuple[str, Any]]:
        written.append(got)
        return [("b", it)]

    with pytest.raises(EndpointError):
        run_flow(ThreadExecutor(2), {"a": first, "b": second}, {"a": write_a, "b": lambda _i, _g: written.append("b")},
                 [("a", Item(f"i{k}")) for k in range(50)])
    assert "b" not in written and written  # stopped at the 401: nothing of the failing stage written


def test_follow_ups_queue_behind_the_tasks_queued_before_them() -> None:
    order: list[str] = []

    def write_a(it: Item, _got: Any) -> list[tuple[str, Any]]:
        return [("b", it)]

    def record(it: Item) -> str:
        order.append(it.id)
        return it.id

    run_flow(ThreadExecutor(1), {"a": record, "b": lambda it: order.append("b:" + it.id)},
             {"a": write_a, "b": lambda _i, _g: None}, [("a", Item(k)) for k in ("x", "y", "z")])
    assert order == ["x", "y", "z", "b:x", "b:y", "b:z"]  # every first stage is started before any follow-up


def test_follow_ups_go_first_once_the_bound_of_waiting_ones_is_reached() -> None:
    order: list[str] = []

    def record(it: Item) -> str:
        order.append(it.id)
        return it.id

    run_flow(ThreadExecutor(1), {"a": record, "b": lambda it: order.append("b:" + it.id)},
             {"a": lambda it, _g: [("b", it)], "b": lambda _i, _g: None},
             [("a", Item(k)) for k in "stuvwxyz"], hold=2)
    # two follow-ups may wait; the third waiting one sends them ahead of the next new item
    assert order == ["s", "t", "b:s", "u", "b:t", "v", "b:u", "w", "b:v", "x", "b:w", "y", "b:x", "z",
                     "b:y", "b:z"], order
    peak = [0]
    feed = Feed([("a", k) for k in range(100)], hold=3)
    for task in feed:
        if task[0] == "a":
            feed.push(("b", task[1]))
        peak[0] = max(peak[0], len(feed.follow))
    assert peak[0] == 3 and len(feed) == 0  # never more than ``hold`` follow-ups held, none lost


def test_follow_up_bound_scales_with_the_executor() -> None:
    assert follow_up_bound(ThreadExecutor(2)) == 32
    assert follow_up_bound(ThreadExecutor(64)) == 512


def test_feed_gives_tasks_pushed_after_it_ran_dry() -> None:
    feed = Feed([("a", 1)])
    assert list(feed) == [("a", 1)] and list(feed) == []
    feed.push(("b", 2))
    assert next(feed) == ("b", 2)
