"""EviPath with bounded memory (issue 27, part 3): the run holds no input item, path or selection
beyond the items in flight (the work lists hold ids; a task reads its records from the stage files
by byte offset), the export streams ``conversations.jsonl``, and every file is the one the
list-based pipeline wrote (tests/unit/evipath_reference.py keeps that pipeline)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from evipath_reference import OldEviPathSynth

from agentrag.synth.driver import run_synthesizer
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.synth.evipath import export as export_mod
from agentrag.synth.evipath import pipeline as pipeline_mod
from agentrag.synth.evipath.schema import ConversationRecord, EviItem, IterationRecord, SelectionRecord
from agentrag.synth.lazy import StageGroups, StageIndex
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

N = 12
TIMINGS = {"wall_s", "path_seconds_per_item", "llm", "invocation_wall_s", "invocation_llm", "started", "finished", "seconds", "timings"}


@pytest.fixture(scope="module")
def musique(data_dir: Path) -> Path:
    return data_dir / "musique" / "train_100.jsonl"


@pytest.fixture(scope="module")
def records(musique: Path) -> list[dict]:
    return [json.loads(line) for line in musique.read_text().splitlines()[:N]]


def _untimed(name: str, data: bytes) -> bytes:
    """Plans and iterations record their wall time (``elapsed``): set to 0, every other byte kept."""
    if name not in ("plans.jsonl", "iterations.jsonl"):
        return data
    return b"".join(json.dumps({**json.loads(x), "elapsed": 0}).encode() + b"\n" for x in data.splitlines())


def _files(run: Path) -> dict[str, bytes]:
    """Every stage file and export file of a run (not metrics, reports, caches, locks)."""
    return {str(p.relative_to(run)): _untimed(p.name, p.read_bytes()) for p in sorted(run.rglob("*"))
            if p.is_file() and (p.suffix == ".jsonl" or p.parent.name.startswith("sft"))
            and not p.name.startswith(".") and "cache" not in str(p.relative_to(run))
            and not p.name.endswith(".timings.jsonl")}  # the timings of the finished stage files


def _metrics(run: Path) -> dict[str, Any]:
    m = json.loads((run / "metrics.json").read_text().replace(str(run), "RUN"))
    return {k: v for k, v in m.items() if k not in TIMINGS and k != "name"}


def _alive(*kinds: type) -> int:
    gc.collect()  # count what is reachable, not garbage a collection has not reached yet
    return sum(isinstance(o, kinds) for o in gc.get_objects())


@pytest.mark.parametrize("split", ["both", "planner"])
def test_streaming_run_writes_the_files_of_the_list_based_run(tmp_path: Path, records, musique: Path, split: str):
    outs = {}
    for name, run in (("old", lambda cfg, out, **kw: run_synthesizer(OldEviPathSynth(), cfg, out, **kw)),
                      ("new", run_evipath)):
        out = tmp_path / name
        for limit in (5, N):  # a run, then a resume that adds items (the first five are done)
            cfg = EviPathRunConfig(datasets=[str(musique)], limit=limit, concurrency=1, split=split)
            run(cfg, out, planner=CleanGoldLLM(records), embedder=ContentWordEmbedder())
        outs[name] = out
    old, new = _files(outs["old"]), _files(outs["new"])
    assert sorted(old) == sorted(new) and "sft/trl_sft.jsonl" in new and "selections.jsonl" in new
    assert [k for k in old if old[k] != new[k]] == []
    assert _metrics(outs["old"]) == _metrics(outs["new"])
    assert _metrics(outs["new"])["funnel"][0]["in"] == N


class _Counting(CleanGoldLLM):
    """Counts, at every LLM call, the input items and stage records alive in the process."""

    peak: dict[str, int]

    def _reply(self, messages: Any) -> str:
        for name, kind in (("items", EviItem), ("records", (IterationRecord, SelectionRecord))):
            self.peak[name] = max(self.peak.get(name, 0), _alive(kind))
        return super()._reply(messages)  # type: ignore[no-any-return]


def test_the_stages_hold_only_the_records_of_the_items_in_flight(tmp_path: Path, records, musique: Path,
                                                                  monkeypatch: pytest.MonkeyPatch, frozen_heap: None):
    llm = _Counting(records)
    llm.peak = {}
    at_gate: list[int] = []
    at_export: list[int] = []
    check_path = pipeline_mod.check_path
    wording = export_mod.synthesis_wording

    def counting_check(*a: Any, **kw: Any) -> Any:
        at_gate.append(_alive((EviItem, IterationRecord, SelectionRecord)))
        return check_path(*a, **kw)

    def counting_wording(text: str) -> bool:
        at_export.append(_alive(ConversationRecord))
        return wording(text)

    monkeypatch.setattr(pipeline_mod, "check_path", counting_check)
    monkeypatch.setattr(export_mod, "synthesis_wording", counting_wording)
    # lexical gates: every verifier call would count the whole heap again (gc) for no new stage;
    # what the gate stage holds is counted at check_path
    cfg = EviPathRunConfig(datasets=[str(musique)], limit=N, concurrency=1, gates={"verifier": "none"})
    m = run_evipath(cfg, tmp_path / "run", planner=llm, embedder=ContentWordEmbedder())
    assert m["funnel"][5]["in"] == N and m["export"]["exported"] > 2 * N  # every item went through
    # the list-based run held every item (twice) during every call, and every path and selection
    assert llm.peak["items"] <= 2, llm.peak
    assert llm.peak["records"] <= 12, llm.peak  # one item's iterations + selections (< 1 item per call)
    assert len(at_gate) == N and max(at_gate) <= 16, at_gate  # one item's records while gated (old: 8 N)
    assert at_export and max(at_export) <= 2, max(at_export)  # the conversation being exported


def test_stage_index_and_groups_read_the_first_line_of_each_id(tmp_path: Path):
    p = tmp_path / "iterations.jsonl"
    rows = [{"id": "a-1", "item_id": "a", "n": 1, "provenance": {"stage": "paths"}},
            {"id": "b-1", "item_id": "b", "n": 1, "last": True, "provenance": {"stage": "paths"}},
            {"id": "a-1", "item_id": "a", "n": 9, "provenance": {"stage": "paths"}},  # duplicate id: ignored
            {"id": "a-2", "item_id": "a", "n": 2, "last": True, "provenance": {"stage": "paths"}}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "torn"')
    groups = StageGroups(p, IterationRecord, "item_id", mark="last")
    assert list(groups) == ["a", "b"] and groups.marked == {"a", "b"}
    assert [r.n for r in groups["a"]] == [1, 2] and groups["missing"] == []
    index = StageIndex(p, IterationRecord)
    assert len(index) == 3 and index["a-1"].n == 1 and "torn" not in index and index.get("zz") is None
    assert StageIndex(p, IterationRecord, {"b-1"}).offsets.keys() == {"b-1"}
