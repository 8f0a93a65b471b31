"""A no-op rerun of a finished run skips the pipeline (issue 27, part 3): it opens no stage file and
scans nothing for pending work, and reports what the full resume reports; any change falls back to
the full resume (an appended or touched stage file, a deleted export, another config, more
items), and so does every rerun after an outage (unfinished items), a bug or a crash."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_reasonrag_faults import _fails_at
from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.errors import EndpointError, LLMError
from agentrag.records import QAItem
from agentrag.synth.driver import FINISHED
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.run import ReasonRagSynth
from agentrag.testing import ScriptedLLM

OTHER = QAItem(id="q2", question="Who directed Film Alpha (again)?", golden_answers=["John Smith"])
#: metrics keys that describe the invocation (its wall time, its LLM calls), not the run's data
INVOCATION = {"wall_s", "llm", "invocations", "invocation_wall_s", "invocation_llm"}


@pytest.fixture
def full_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the full resumes (the pipeline: stage files opened, pending work scanned)."""
    calls: list[int] = []
    original = ReasonRagSynth.pipeline

    def counted(self: ReasonRagSynth, *a: Any) -> Any:
        calls.append(1)
        return original(self, *a)

    monkeypatch.setattr(ReasonRagSynth, "pipeline", counted)
    return calls


def run(out: Path, questions: list[QAItem] | None = None, llm: Any = None, **over: Any) -> dict[str, Any]:
    return run_reasonrag(config(**over), out, llm=llm or ScriptedLLM(default=policy), retriever=retriever(),
                         questions=questions or [QUESTION, OTHER])


def data(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in INVOCATION}


def test_noop_rerun_skips_the_pipeline_and_reports_the_same(tmp_path: Path, full_runs: list[int],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(tmp_path)
    assert len(full_runs) == 1 and (tmp_path / FINISHED).exists()
    report = (tmp_path / "report.md").read_text()
    import agentrag.runs

    def no_store(*a: Any, **k: Any) -> Any:
        raise AssertionError("a stage file was opened")

    monkeypatch.setattr(agentrag.runs.RunDir, "stage_file", no_store)
    again = run(tmp_path)
    assert len(full_runs) == 1 and data(again) == data(first)
    assert again["unfinished"] == 0 and again["pairs"] > 0
    assert data_sections((tmp_path / "report.md").read_text()) == data_sections(report)


def data_sections(report: str) -> list[str]:
    """The report's lines but the wall time and the LLM usage tables (this invocation's calls)."""
    out, skip = [], False
    for line in report.splitlines():
        if line.startswith("## "):
            skip = line.startswith("## LLM usage")
        if not skip and "wall time" not in line.lower():
            out.append(line)
    return out


def _append_copy(path: Path) -> None:
    """Append a record of another id (a copy of the first line) to a stage file."""
    rec = json.loads(path.read_text().splitlines()[0])
    rec["id"] = rec["id"] + "-new"
    with path.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")


@pytest.mark.parametrize("change", ["append", "touch", "delete_export", "config", "more_items"])
def test_any_change_runs_the_full_resume(tmp_path: Path, full_runs: list[int], change: str) -> None:
    first = run(tmp_path, [QUESTION])
    assert len(full_runs) == 1
    over: dict[str, Any] = {}
    questions = [QUESTION]
    if change == "append":
        _append_copy(tmp_path / "greedy.jsonl")
    elif change == "touch":
        st = (tmp_path / "trees.jsonl").stat()
        os.utime(tmp_path / "trees.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    elif change == "delete_export":
        (tmp_path / "dpo" / "trl_dpo.jsonl").unlink()
    elif change == "config":
        over = {"greedy_baseline": False}
    else:
        questions = [QUESTION, OTHER]
    again = run(tmp_path, questions, **over)
    assert len(full_runs) == 2
    if change == "delete_export":
        assert (tmp_path / "dpo" / "trl_dpo.jsonl").exists() and data(again) == data(first)
    if change == "more_items":
        assert again["questions"] == 2 and first["questions"] == 1
    if change == "append":
        assert data(again) == data(first)  # a record of no question asked for: the same statistics
    # and the rerun after it, with nothing changed, skips it again
    run(tmp_path, questions, **over)
    assert len(full_runs) == 2


def test_after_an_outage_every_rerun_resumes_until_all_finish(tmp_path: Path, full_runs: list[int]) -> None:
    m = run(tmp_path, [QUESTION], llm=ScriptedLLM(default=_fails_at(8, LLMError("HTTP 503", is_retryable=True))),
            concurrency=1)
    assert m["unfinished"] == 1 and not (tmp_path / FINISHED).exists()
    done = run(tmp_path, [QUESTION], concurrency=1)
    assert len(full_runs) == 2 and done["unfinished"] == 0 and done["questions"] == 1
    run(tmp_path, [QUESTION], concurrency=1)
    assert len(full_runs) == 2


def test_an_outage_after_a_finished_run_keeps_no_stale_output(tmp_path: Path, full_runs: list[int]) -> None:
    """A finished run of one question, then an outage on a run of two: the rerun of the two does
    the full resume (the finished output was of other items), and so does the rerun of the one
    when the outage appended records."""
    run(tmp_path, [QUESTION], concurrency=1)
    m = run(tmp_path, [QUESTION, OTHER], llm=ScriptedLLM(default=_fails_at(3, LLMError("HTTP 503",
                                                                                       is_retryable=True))),
            concurrency=1)
    assert m["unfinished"] == 1
    one = run(tmp_path, [QUESTION], concurrency=1)  # the outage appended events of q2: the files changed
    assert len(full_runs) == 3 and one["questions"] == 1
    both = run(tmp_path, [QUESTION, OTHER], concurrency=1)
    assert len(full_runs) == 4 and both["unfinished"] == 0 and both["questions"] == 2


def test_a_run_that_stopped_on_an_endpoint_error_is_resumed_in_full(tmp_path: Path, full_runs: list[int]) -> None:
    """A crash-like stop (a 401 raises out of the run) leaves no finished output of those items."""
    run(tmp_path, [QUESTION], concurrency=1)
    with pytest.raises(EndpointError):
        run(tmp_path, [QUESTION, OTHER], concurrency=1,
            llm=ScriptedLLM(default=_fails_at(3, EndpointError("HTTP 401 from stub", status=401))))
    both = run(tmp_path, [QUESTION, OTHER], concurrency=1)
    assert len(full_runs) == 3 and both["unfinished"] == 0 and both["questions"] == 2



def _ragshaper(out: Path, data: Path) -> Callable[[], dict[str, Any]]:
    from test_ragshaper_pipeline import _cfg, _components
    from test_ragshaper_support import ShaperRun

    return lambda: ShaperRun(out, _cfg(), _components()).run(["Ada Varn", "Ott Brem"])


def _tracer(out: Path, data: Path) -> Callable[[], dict[str, Any]]:
    from tracer_support import run_config, run_world

    cfg = run_config(out)  # one config (its excluded-titles file) for every run
    return lambda: run_world(out, cfg)


def _evipath(out: Path, data: Path) -> Callable[[], dict[str, Any]]:
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

    musique = data / "musique" / "train_100.jsonl"
    recs = [json.loads(x) for x in musique.read_text().splitlines()[:3]]
    return lambda: run_evipath(EviPathRunConfig(datasets=[str(musique)], limit=3, concurrency=2), out,
                               planner=CleanGoldLLM(recs), embedder=ContentWordEmbedder())


ENTRY = {"ragshaper": ("agentrag.synth.ragshaper.pipeline", "RagShaperPipeline", "pipeline", _ragshaper),
         "tracer": ("agentrag.synth.tracer.pipeline", "TracerStages", "pipeline", _tracer),
         "evipath": ("agentrag.synth.evipath.run", "EviPathSynth", "pipeline", _evipath)}


@pytest.mark.parametrize("name", sorted(ENTRY))
def test_every_synthesizer_skips_the_pipeline_on_a_noop_rerun_only(tmp_path: Path, name: str, data_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    mod, cls_name, attr, make = ENTRY[name]
    cls = getattr(importlib.import_module(mod), cls_name)
    original, calls = getattr(cls, attr), []

    def counted(self: Any, *a: Any) -> Any:
        calls.append(1)
        return original(self, *a)

    monkeypatch.setattr(cls, attr, counted)
    out = tmp_path / "run"
    go = make(out, data_dir)
    first = go()
    assert len(calls) == 1 and first["unfinished"] == 0
    again = go()
    assert len(calls) == 1 and data(again) == data(first)
    stage = sorted(p for p in out.glob("*.jsonl") if p.stat().st_size)[0]
    st = stage.stat()
    os.utime(stage, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a touched stage file: the full resume
    third = go()
    assert len(calls) == 2 and data(third) == data(first)
