"""RAGShaper end to end on the embedded model and a small real KB (HotpotQA contexts), via the CLI.

Small on purpose (depth 1, no branching, short completions): a 135M model rarely writes an
acceptable QA pair, so zero accepted trajectories is a valid outcome. What must hold: no crash,
every stage file exists, every funnel stage is accounted for (a rejected record says why), and
a rerun resumes without paying any LLM call again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.ingest import pooled_passages

pytestmark = pytest.mark.slow

SETTINGS = ["curator.max_depth=1", "curator.p_branch=0.0", "curator.max_tokens=128",
            "curator.max_observation_chars=200", "distractors.docs_per_call=1", "distractors.max_tokens=160",
            "qa.max_tokens=256", "elicit.max_steps=2", "elicit.max_tokens=96", "concurrency=2"]


@pytest.fixture(scope="module")
def small_kb(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = tmp_path_factory.mktemp("rs_kb") / "hotpot_sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(3)), encoding="utf-8")
    out = tmp_path_factory.mktemp("rs_kb_out") / "kb"
    KnowledgeBase.build(pooled_passages([sub]), out, KBConfig(), progress=False)
    return out


def _invoke(kb: Path, out: Path) -> dict[str, object]:
    args = ["synth", "ragshaper", "--kb", str(kb), "--seeds", "2", "--llm", "embedded", "--out", str(out)]
    for s in SETTINGS:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "metrics.json").read_text())


def test_embedded_pipeline_end_to_end_and_resume(small_kb: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    metrics = _invoke(small_kb, out)
    funnel = {row["stage"]: row for row in metrics["funnel"]}  # type: ignore[attr-defined]
    assert funnel["seeds"]["out"] == 2 and funnel["trees (explore)"]["out"] == 2
    assert funnel["paths (Eq. 5)"]["out"] == 2
    qa = funnel["QA (Eq. 6)"]
    assert qa["out"] + sum(qa["rejected"].values()) == qa["in"]  # every question accounted for
    assert funnel["trajectories (Eq. 7-8)"]["out"] == qa["out"]
    for stage in ("seeds", "trees", "distractors", "paths", "qa", "trajectories", "filter", "tags"):
        assert (out / f"{stage}.jsonl").exists()
    for line in (out / "trees.jsonl").read_text().splitlines():
        for node in json.loads(line)["nodes"][1:]:
            prov = node["provenance"]
            assert prov["stage"] == "explore" and prov["model"] and prov["prompt_hash"]
            assert prov["raw_output"] is not None and prov["usage"]["completion_tokens"] > 0
    for line in (out / "qa.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert rec["status"] == "accepted" or rec["reason"]
    report = (out / "report.md").read_text()
    assert "## Funnel" in report and "Behaviour tags" in report

    # resume: the same command again pays no LLM call and changes no record
    before = {p.name: p.read_text() for p in out.glob("*.jsonl")}
    again = _invoke(small_kb, out)
    assert again["funnel"] == metrics["funnel"]
    assert all(st["inner_calls"] == 0 for st in again["llm_calls"].values()), again["llm_calls"]  # type: ignore[attr-defined]
    assert {p.name: p.read_text() for p in out.glob("*.jsonl")} == before
