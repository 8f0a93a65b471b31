"""One heartbeat for every long stage: a line at once when a stage starts, then at least every 30 s
whether or not an item finished (done/total, a windowed rate, ETA once measurable), from the CLI
and from the Python API alike (fake clock; the ticker thread is driven by hand)."""

from __future__ import annotations

import io
import json
import re
import sys
from typing import Any

import pytest

from agentrag.progress import Heartbeat, interactive, progress_for


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def beat(lines: list[str], clock: Clock, **kw: Any) -> Heartbeat:
    return Heartbeat(lines.append, clock=clock, stamp=lambda: f"t={clock.t:.0f}", **kw)


def test_a_stage_whose_items_take_minutes_still_beats_every_30_seconds():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock)
    hb("eval", 0, 30)
    assert lines == ["[t=0] eval: 0/30 (0%), started"]
    for t in range(1, 600):  # ten minutes, no item finished: the ticker runs every second
        clock.t = float(t)
        hb.tick()
    times = [int(re.match(r"\[t=(\d+)\]", ln).group(1)) for ln in lines]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(lines) == 20 and max(gaps) == 30, gaps
    assert all("first items still running" in ln and "ETA" not in ln for ln in lines[1:]), lines[1]
    assert "elapsed 9m30s" in lines[-1]


def test_the_rate_is_windowed_and_the_eta_appears_once_measurable():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock, window_s=60.0)
    hb("synth", 0, 100)
    clock.t = 300.0  # a slow first item (model load) ...
    hb("synth", 1, 100)
    for t in range(301, 361):  # ... then one item a second
        clock.t = float(t)
        hb("synth", t - 299, 100)
        hb.tick()
    last = lines[-1]
    m = re.search(r"synth: (\d+)/100 \(\d+%\), ([\d.]+) items/s, elapsed 6m00s, ETA (\S+)", last)
    assert m, lines
    assert float(m.group(2)) == pytest.approx(1.0, abs=0.05)  # over the window, not 61/360
    assert m.group(3) in ("39s", "40s")


def test_a_stalled_stage_says_nothing_finished_in_the_window():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock, window_s=60.0)
    hb("qa", 0, 10)
    clock.t = 10.0
    hb("qa", 5, 10)
    for t in range(11, 200):
        clock.t = float(t)
        hb.tick()
    assert "qa: 5/10 (50%), none finished in the last 1m00s" in lines[-1] and "ETA" not in lines[-1]


def test_an_unknown_total_shows_the_count_and_the_end_line_comes_once():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock, every_s=30.0)
    hb("ingest", 0, 0)
    clock.t = 31.0
    hb("ingest", 5000, 0)
    assert lines[0].endswith("ingest: 0, started") and "ingest: 5000, " in lines[1] and "passages" not in lines[1]
    hb("ingest", 6000, 6000)
    hb("ingest", 6000, 6000)
    clock.t = 100.0
    hb.tick()  # a finished stage no longer beats
    assert lines[-1].endswith("done") and sum("done" in ln for ln in lines) == 1 and len(lines) == 3


def test_the_ticker_thread_beats_on_its_own():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock)
    import time

    with hb.running(tick_s=0.01):
        hb("train", 0, 3)
        clock.t = 31.0
        time.sleep(0.2)
    assert len(lines) >= 2 and "train: 0/3 (0%), first items still running, elapsed 31s" in lines[1]


def test_progress_argument_of_the_library(monkeypatch):
    seen: list[tuple[str, int, int]] = []
    with progress_for(lambda *a: seen.append(a)) as cb:  # the caller's callback, as given
        cb("x", 1, 2)
    assert seen == [("x", 1, 2)]
    with progress_for(False) as cb:
        assert cb is None
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with progress_for(True, unit="passages") as cb:
        assert isinstance(cb, Heartbeat)
        cb("embedding", 0, 10)
    assert "embedding: 0/10 (0%), started" in err.getvalue()
    monkeypatch.delattr(sys, "ps1", raising=False)
    assert interactive() is False  # StringIO is no terminal
    with progress_for(None) as cb:
        assert cb is None
    monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)
    assert interactive() is True
    with progress_for(None) as cb:
        assert isinstance(cb, Heartbeat)


def test_run_eval_from_python_beats_on_stderr_when_asked(tmp_path, capsys):
    from test_eval_outages import PASSAGES, plan_step_policy

    from agentrag.eval.run import run_eval
    from agentrag.eval.runner import EvalConfig
    from agentrag.testing import FakeRetriever, ScriptedLLM

    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in range(3)))
    run_eval(EvalConfig(dataset=str(path), agent="plan_step", concurrency=1), tmp_path / "r", progress=True,
             llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES))
    err = capsys.readouterr().err
    assert re.search(r"eval: 0/3 \(0%\), started", err) and re.search(r"eval: 3/3 \(100%\).*done", err), err
    run_eval(EvalConfig(dataset=str(path), agent="plan_step", concurrency=1), tmp_path / "r2", progress=False,
             llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES))
    assert "started" not in capsys.readouterr().err


def test_build_kb_reports_every_stage_from_the_start(tmp_path):
    from agentrag.kb import build_kb
    from agentrag.testing import HashEmbedder

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"T{i}", "text": f"text {i}"}) + "\n" for i in range(30)))
    seen: list[tuple[str, int, int]] = []
    build_kb(corpus, tmp_path / "kb", embedder=HashEmbedder(), progress=lambda *a: seen.append(a))
    stages = [s for s, _, _ in seen]
    assert stages[0] == "ingest" and seen[0][1] == 0
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == ["ingest", "bm25", "embedding"]
    assert ("ingest", 30, 30) in seen and ("bm25", 30, 30) in seen and seen[-1] == ("embedding", 30, 30)


def test_the_flow_says_every_stage_started_before_its_first_item_finishes():
    from agentrag.exec import ThreadExecutor, run_flow

    seen: list[tuple[str, int, int]] = []

    def writer_a(item: int, result: int) -> list[tuple[str, int]]:
        return [("b", result)]

    run_flow(ThreadExecutor(1), {"a": lambda x: x, "b": lambda x: x}, {"a": writer_a, "b": lambda i, r: []},
             [("a", 1), ("a", 2)], progress=lambda *a: seen.append(a))
    assert seen[0] == ("a", 0, 2)
    first_b = next(i for i, s in enumerate(seen) if s[0] == "b")
    assert seen[first_b] == ("b", 0, 1)
    assert ("b", 2, 2) in seen and ("a", 2, 2) in seen


def test_a_slow_stage_shows_its_rate_per_minute():
    lines: list[str] = []
    clock = Clock()
    hb = beat(lines, clock)
    hb("eval", 0, 3)
    clock.t = 150.0
    hb("eval", 1, 3)
    assert "eval: 1/3 (33%), 0.40 items/min, elapsed 2m30s, ETA 5m00s" in lines[-1], lines
