"""Outages are not data: with a backend failing every call (retryable LLMError, as after HTTP
500s), nothing is written as a result, the funnel counts the unfinished items, and a rerun
against a healthy backend completes exactly those items. Also: sampling is seeded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_ragshaper_pipeline import _cfg, _components, _lines
from test_ragshaper_support import ShaperRun, curator_llm, curator_reply, teacher_llm

from agentrag.records import Message
from agentrag.runs import RunDir
from agentrag.testing import OutageLLM, ScriptedLLM


def _is(name: str):  # type: ignore[no-untyped-def]
    def match(_messages: list[Message], kw: dict[str, Any]) -> bool:
        rf = kw.get("response_format") or {}
        return rf.get("json_schema", {}).get("name") == name
    return match


def _stage_ids(run: Path, stage: str) -> list[str]:
    return [str(r["id"]) for r in _lines(run / f"{stage}.jsonl")]


def test_curator_down_leaves_every_tree_unfinished_then_rerun_completes(tmp_path: Path) -> None:
    run = tmp_path / "r"
    down = OutageLLM(curator_llm())
    metrics = ShaperRun(RunDir(run), _cfg(), _components(curator=down, tagger=down)).run(["Ada Varn", "Ott Brem"])
    assert down.failures >= 2
    assert _stage_ids(run, "trees") == [] and _stage_ids(run, "qa") == []  # no "ok" tree of error nodes
    assert metrics["unfinished_by_stage"] == {"explore": 2} and metrics["unfinished"] == 2
    trees_row = next(r for r in metrics["funnel"] if r["stage"] == "explore")
    assert trees_row["unfinished"] == 2 and trees_row["out"] == 0

    healthy = curator_llm()
    again = ShaperRun(RunDir(run), _cfg(), _components(curator=healthy, tagger=healthy)).run(
        ["Ada Varn", "Ott Brem"])
    assert again["unfinished"] == 0
    assert len(_stage_ids(run, "trees")) == 2 and all(t["status"] == "ok" for t in _lines(run / "trees.jsonl"))
    assert {r["stage"]: r["out"] for r in again["funnel"]}["qa"] >= 2


def _trees(run: Path) -> list[dict]:
    from agentrag.runs import read_records
    from agentrag.synth.ragshaper.schema import InfoTree

    return [t.model_dump() for t in read_records(run / "trees.jsonl", InfoTree)]


def test_qa_and_teacher_outages_redo_exactly_the_unfinished_items(tmp_path: Path) -> None:
    run = tmp_path / "r"
    # exploration works; every QA-writer call fails
    curator = OutageLLM(curator_llm(), fails=_is("qa_pair"))
    m1 = ShaperRun(RunDir(run), _cfg(), _components(curator=curator, tagger=curator)).run(["Ada Varn"])
    paths = _stage_ids(run, "paths")
    assert paths and _stage_ids(run, "qa") == [] and m1["unfinished_by_stage"] == {"qa": len(paths)}
    qa_row = next(r for r in m1["funnel"] if r["stage"] == "qa")
    assert qa_row["rejected"] == {} and qa_row["unfinished"] == len(paths)  # not "llm_error" rejections

    # QA back; the teacher is down: questions are written, trajectories stay unfinished
    teacher = OutageLLM(teacher_llm())
    m2 = ShaperRun(RunDir(run), _cfg(), _components(teacher=teacher)).run(["Ada Varn"])
    accepted = [q["id"] for q in _lines(run / "qa.jsonl") if q["status"] == "accepted"]
    assert sorted(_stage_ids(run, "qa")) == sorted(f"{p}-qa" for p in paths)
    assert accepted and _stage_ids(run, "trajectories") == [] and m2["unfinished_by_stage"] == {"elicit": len(accepted)}
    trees_before = _trees(run)

    # everything healthy: only the trajectories are made (one each), nothing else is redone
    comps = _components()
    m3 = ShaperRun(RunDir(run), _cfg(), comps).run(["Ada Varn"])
    assert m3["unfinished"] == 0
    assert sorted(_stage_ids(run, "trajectories")) == sorted(f"{q}-t" for q in accepted)
    assert _trees(run) == trees_before  # the finished file drops the timings; reading puts them back
    names = [(r.get("response_format") or {}).get("json_schema", {}).get("name") for r in comps.curator.requests]
    assert "curator_action" not in names and "qa_pair" not in names  # trees and QA were not redone
    assert all(t["finish_reason"] != "llm_error" for t in _lines(run / "trajectories.jsonl"))


def test_retrieval_outage_during_elicitation_is_unfinished(tmp_path: Path) -> None:
    from test_ragshaper_support import main_retriever

    from agentrag.errors import RetrievalError

    class Flaky:
        def __init__(self) -> None:
            self.inner, self.down = main_retriever(), False

        def search(self, queries: list[str], k: int, threshold: float | None = None) -> Any:
            if self.down:
                raise RetrievalError("retrieval server 503", is_retryable=True)
            return self.inner.search(queries, k, threshold=threshold)

    kb = Flaky()

    def curator(messages: list[Message], **kw: Any) -> Any:
        if _is("qa_pair")(messages, kw):
            kb.down = True  # the retrieval server goes down once the questions are being written
        return curator_reply(messages, **kw)

    run = tmp_path / "r"
    metrics = ShaperRun(RunDir(run), _cfg(), _components(main_kb=kb, curator=ScriptedLLM(default=curator))).run(
        ["Ada Varn"])
    assert _stage_ids(run, "qa") and _stage_ids(run, "trajectories") == []
    accepted = [q["id"] for q in _lines(run / "qa.jsonl") if q["status"] == "accepted"]
    assert metrics["unfinished_by_stage"]["elicit"] == len(accepted) == metrics["unfinished"] > 0


def test_sampling_is_seeded_by_default(tmp_path: Path) -> None:
    comps = _components()
    ShaperRun(RunDir(tmp_path / "r"), _cfg(), comps).run(["Ada Varn"])
    assert comps.curator.requests and all(r.get("seed") == 0 for r in comps.curator.requests)  # type: ignore[attr-defined]
    assert comps.teacher.requests and all(r.get("seed") == 0 for r in comps.teacher.requests)  # type: ignore[attr-defined]


def test_rerun_of_a_finished_run_reproduces_its_records(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ShaperRun(RunDir(a), _cfg(), _components()).run(["Ada Varn"])
    ShaperRun(RunDir(b), _cfg(), _components()).run(["Ada Varn"])
    def stripped(path: Path) -> list[dict]:  # records in id order: items finish in any order on threads
        return sorted(({k: v for k, v in r.items() if k not in ("elapsed", "provenance", "nodes")}
                       for r in _lines(path)), key=lambda r: r["id"])

    for stage in ("trees", "paths", "qa"):
        assert stripped(a / f"{stage}.jsonl") == stripped(b / f"{stage}.jsonl"), stage
    assert json.loads((a / "metrics.json").read_text())["funnel"] == json.loads((b / "metrics.json").read_text())["funnel"]


class _LosesFirstItem:
    """An executor (threads underneath) that reports its first item of each stage lost, as the
    Ray executor does after its retries (a retryable RunError), without running it."""

    def __init__(self) -> None:
        from agentrag.exec import ThreadExecutor

        self.inner, self.lost = ThreadExecutor(1), 0

    def map(self, fn, items):  # type: ignore[no-untyped-def]
        from agentrag.errors import RunError
        from agentrag.exec.base import Outcome

        items = list(items)
        if items:
            self.lost += 1
            yield Outcome(items[0], error=RunError("worker lost", is_retryable=True))
        yield from self.inner.map(fn, items[1:])

    def close(self) -> None:
        self.inner.close()


def test_lost_worker_leaves_the_item_unfinished_and_a_rerun_redoes_it(tmp_path: Path) -> None:
    run = tmp_path / "r"
    lossy = _LosesFirstItem()
    m1 = ShaperRun(RunDir(run), _cfg(), _components(), executor=lossy).run(["Ada Varn", "Ott Brem"])
    assert m1["unfinished_by_stage"]["explore"] == 1 and len(_stage_ids(run, "trees")) == 1
    m2 = ShaperRun(RunDir(run), _cfg(), _components()).run(["Ada Varn", "Ott Brem"])
    assert m2["unfinished"] == 0 and len(_stage_ids(run, "trees")) == 2
