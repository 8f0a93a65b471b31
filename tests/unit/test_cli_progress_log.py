"""Progress in logs (issue 28): when output is not a terminal, long commands print a plain line per
stage every 30 s or 5% with done/total, rate and ETA, by default."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.cli.main import app
from agentrag.cli.progress import LogProgress
from agentrag.records import Passage, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_line_every_5_percent_or_30_seconds_with_rate_and_eta():
    lines: list[str] = []
    clock = Clock()
    p = LogProgress(lines.append, clock=clock)
    p("eval", 0, 1000)
    assert len(lines) == 1 and "eval: 0/1000 (0%), started" in lines[0]
    for done in range(1, 50):  # under 5% and under 30 s: quiet
        clock.t += 0.1
        p("eval", done, 1000)
    assert len(lines) == 1
    clock.t = 10.0
    p("eval", 50, 1000)  # 5%
    assert len(lines) == 2
    assert re.search(r"eval: 50/1000 \(5%\), 5\.00 items/s, elapsed 10s, ETA 3m10s", lines[1]), lines[1]
    clock.t = 40.0
    p("eval", 51, 1000)  # 30 s since the last line
    assert len(lines) == 3 and "ETA" in lines[2]
    clock.t = 41.0
    p("eval", 1000, 1000)
    assert lines[-1].endswith("done") and "1000/1000 (100%)" in lines[-1]
    p("eval", 1000, 1000)  # no second end line
    assert len(lines) == 4


def test_stages_are_counted_apart_and_a_resumed_stage_rates_only_new_items():
    lines: list[str] = []
    clock = Clock()
    p = LogProgress(lines.append, clock=clock)
    p("paths", 80, 100)  # resumed at 80
    p("qa", 0, 10)
    clock.t = 10.0
    p("paths", 90, 100)
    assert "paths: 90/100 (90%), 1.00 items/s" in lines[-1] and "ETA 10s" in lines[-1]
    p("qa", 1, 10)
    assert "qa: 1/10 (10%), 0.10 items/s" in lines[-1]


def _reply(messages, **kwargs):
    if any(m.role == "tool" for m in messages):
        return "<answer>Rush</answer>"
    return ToolCall(name="dense_search", arguments={"query": messages[-1].content})


def test_eval_logs_progress_lines_when_output_is_not_a_terminal(tmp_path, data_dir, monkeypatch):
    monkeypatch.setattr(agentrag.llm, "resolve_llm", lambda ref="embedded", **kw: ScriptedLLM(default=_reply))
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    passages = [Passage(id="p1", title="Neil Peart", text="Neil Peart was the drummer of Rush.")]
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(passages), raising=False)
    r = CliRunner().invoke(app, ["eval", "--dataset", str(data_dir / "hotpotqa" / "dev_distractor_200.jsonl"),
                                 "--kb", "k", "--llm", "x", "--limit", "3", "-j", "1", "--out", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    assert re.search(r"\w+: 0/3 \(0%\), started", r.output), r.output
    assert re.search(r"\w+: 3/3 \(100%\), [\d.]+ items/s, elapsed \d+s, done", r.output), r.output


def test_kb_build_embedding_lines_come_from_its_checkpoint(tmp_path):
    from agentrag.cli.progress import embedding_progress_lines

    lines: list[str] = []
    out = tmp_path / "kb"
    partial = tmp_path / "kb.partial"
    partial.mkdir()
    state = partial / "embeddings.npy.progress.json"
    clock = Clock()
    seen = LogProgress(lines.append, clock=clock, unit="passages", every_s=0.0)
    import time

    with embedding_progress_lines(out, poll_s=0.01, progress=seen):
        for chunks in (1, 2, 4):
            state.write_text(json.dumps({"fingerprint": "2000:384:all-MiniLM-L6-v2:512:abc", "done_chunks": chunks}))
            clock.t += 5
            time.sleep(0.1)
    text = "\n".join(lines)
    assert "embedding: 512/2000 (26%), started" in text
    assert "embedding: 2000/2000 (100%)" in text and "passages/s" in text


@pytest.mark.parametrize("cmd", ["eval.py", "synth_ragshaper.py", "synth_evipath.py", "synth_reasonrag.py", "synth_tracer.py",
                                 "synth_annotated.py"])
def test_every_long_command_uses_the_progress_that_fits_its_output(cmd):
    from pathlib import Path

    import agentrag.cli

    src = (Path(agentrag.cli.__file__).parent / cmd).read_text()
    assert "progress_output()" in src and "stage_progress()" not in src


def test_the_checkpoint_the_lines_read_is_the_one_the_embedding_writes(tmp_path):
    """The real embedding loop (a hashing embedder): its checkpoint gives the line's counts."""
    from agentrag.cli.progress import embedding_progress_lines
    from agentrag.kb.indexes import embed_to_memmap
    from agentrag.testing import HashEmbedder

    lines: list[str] = []
    (tmp_path / "kb.partial").mkdir()
    with embedding_progress_lines(tmp_path / "kb", poll_s=0.01, progress=LogProgress(lines.append)):
        embed_to_memmap(HashEmbedder(), [f"passage {i}" for i in range(7)],
                        tmp_path / "kb.partial" / "embeddings.npy", chunk=2, progress=False)
    assert any("embedding: 7/7 (100%)" in line for line in lines), lines


def test_a_fast_stage_logs_its_start_and_end_only() -> None:
    """600 items a second: every 5% step comes within the minimum gap, so only start and end print."""
    lines: list[str] = []
    clock = Clock()
    p = LogProgress(lines.append, clock=clock)
    for done in range(0, 101):
        p("search", done, 100)
        clock.t += 0.002
    assert len(lines) == 2 and "started" in lines[0] and "100/100 (100%)" in lines[1], lines


def test_training_reports_every_optimizer_step() -> None:
    """`agentrag train` passes a progress callback into the trainer: one report per step, of max_steps."""
    from types import SimpleNamespace

    from agentrag.train.sft import progress_callbacks

    seen: list[tuple[str, int, int]] = []
    assert progress_callbacks(None) == []
    (cb,) = progress_callbacks(lambda *a: seen.append(a))
    state = SimpleNamespace(global_step=0, max_steps=3)
    cb.on_train_begin(None, state, None)
    for step in (1, 2, 3):
        state.global_step = step
        cb.on_step_end(None, state, None)
    assert seen == [("train", 0, 3), ("train", 1, 3), ("train", 2, 3), ("train", 3, 3)]
    lines: list[str] = []
    clock = Clock()
    p = LogProgress(lines.append, clock=clock)
    for stage, done, total in seen:
        clock.t += 40.0  # a step slower than the 30 s interval: a line each, with rate and ETA
        p(stage, done, total)
    assert "train: 2/3 (67%)" in lines[2] and "ETA" in lines[2] and lines[-1].endswith("done")
