from __future__ import annotations

import json
from pathlib import Path

from test_ragshaper_support import ShaperRun, curator_llm, main_retriever, teacher_llm

from agentrag.records import Passage, read_jsonl
from agentrag.runs import RunDir
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.schema import QARecord
from agentrag.testing import FakeRetriever, ScriptedLLM


def _components(**kw: object) -> RagShaperComponents:
    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    base = dict(curator=curator_llm(), teacher=teacher_llm(), main_kb=main_retriever(), distractor_kb=kb_tilde,
                tagger=curator_llm())
    base.update(kw)
    return RagShaperComponents(**base)  # type: ignore[arg-type]


def _cfg(no_distractors: bool = False) -> RagShaperConfig:
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    cfg.distractors.enabled = not no_distractors
    return cfg


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_whole_pipeline_on_fakes(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    metrics = ShaperRun(run, _cfg(), _components()).run(["Ada Varn", "Ott Brem"])
    funnel = {row["stage"]: row for row in metrics["funnel"]}
    assert funnel["explore"]["out"] == 2
    assert funnel["paths"]["out"] >= 2
    # the fake writes valid pairs, except on paths where its answer 1901 is stated only by a K~ document
    assert funnel["qa"]["out"] > 0
    assert funnel["qa"]["out"] + funnel["qa"]["rejected"].get("distractor", 0) == funnel["paths"]["out"]
    n_traj = funnel["elicit"]["out"]
    assert n_traj == funnel["qa"]["out"] and funnel["filter"]["out"] == n_traj
    # Eq. 8: step 1 always reads K~, so every trajectory met distractors, recorded with their type
    trajs = _lines(tmp_path / "run" / "trajectories.jsonl")
    for t in trajs:
        meta = t["metadata"]
        assert meta["distractors_met"] and all(m["step"] == 1 for m in meta["distractors_met"])
        assert set(meta["distractor_types_met"]) <= {"doppelganger", "false_shortcut", "fragmented_puzzle",
                                                      "subjective_fallacy"}
        assert meta["provenance"]["model"] == "fake-teacher"
    assert metrics["tags"] == {"direct_answer": n_traj}
    assert metrics["distractors"]["created"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Funnel" in report and "Success rate by distractor type met" in report
    # SFT export of the kept trajectories
    assert metrics["export"].get("exported") == n_traj, metrics["export"]
    assert (tmp_path / "run" / "sft" / "dataset_info.json").exists()
    for qa in read_jsonl(tmp_path / "run" / "qa.jsonl", QARecord):
        assert qa.provenance.prompt_hash and qa.provenance.raw_output
    # provenance on every record of every stage
    for stage in ("seeds", "trees", "distractors", "paths", "qa", "filter", "tags"):
        for rec in _lines(tmp_path / "run" / f"{stage}.jsonl"):
            assert rec["provenance"]["stage"], (stage, rec)
    tree = _lines(tmp_path / "run" / "trees.jsonl")[0]
    assert tree["provenance"]["model"] == "fake-curator" and tree["provenance"]["usage"]["calls"] > 0


def test_no_distractors_ablation(tmp_path: Path) -> None:
    metrics = ShaperRun(RunDir(tmp_path / "r"), _cfg(no_distractors=True), _components()).run(["Ada Varn"])
    assert metrics["ablation_no_distractors"] is True
    assert metrics["distractors"]["created"] == {} and metrics["distractors"]["met_documents"] == {}
    assert (tmp_path / "r" / "distractors.jsonl").read_text() == ""
    for t in _lines(tmp_path / "r" / "trajectories.jsonl"):
        assert t["metadata"]["navigation"] == "plain" and t["metadata"]["distractors_met"] == []


def test_failures_become_flagged_records_not_crashes(tmp_path: Path) -> None:
    comps = _components(curator=ScriptedLLM(default="I will not answer in JSON"))
    cfg = _cfg()
    cfg.curator.p_branch = 0.0
    metrics = ShaperRun(RunDir(tmp_path / "r"), cfg, comps).run(["Ada Varn"])
    funnel = {row["stage"]: row for row in metrics["funnel"]}
    assert metrics["funnel_notes"]["explore"]["node_errors"] == {"parse_error": 1}
    qa = _lines(tmp_path / "r" / "qa.jsonl")
    assert len(qa) == 1 and qa[0]["status"] == "rejected" and qa[0]["reason"].startswith("schema_failure")
    assert funnel["qa"]["rejected"] == {"schema_failure": 1}
    assert funnel["elicit"]["out"] == 0


def test_rerun_skips_finished_work(tmp_path: Path) -> None:
    cfg = _cfg()
    ShaperRun(RunDir(tmp_path / "r"), cfg, _components()).run(["Ada Varn"])
    comps = _components(curator=ScriptedLLM(), teacher=ScriptedLLM(), tagger=ScriptedLLM())  # any call would fail
    metrics = ShaperRun(RunDir(tmp_path / "r"), cfg, comps).run(["Ada Varn"])
    assert comps.curator.calls == 0 and comps.teacher.calls == 0  # type: ignore[attr-defined]
    assert {row["stage"]: row["out"] for row in metrics["funnel"]}["explore"] == 1
