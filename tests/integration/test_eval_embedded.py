"""`agentrag eval` end to end on the real embedded model, embedder and shared HotpotQA data."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.integration]
N = 2


@pytest.fixture(scope="module")
def tiny_kb(data_dir, tmp_path_factory):
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import gold_passages, pooled_passages

    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    root = tmp_path_factory.mktemp("evalkb")
    sub = root / "hotpot_sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(N)), encoding="utf-8")
    KnowledgeBase.build(pooled_passages([sub]), root / "kb", KBConfig(), gold=gold_passages(sub), progress=False)
    return sub, root / "kb"


def test_eval_react_embedded(tiny_kb, tmp_path):
    dataset, kb = tiny_kb
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--dataset", str(dataset), "--kb", str(kb), "--agent", "react",
                                   "--llm", "embedded", "--out", str(out), "-j", "1",
                                   "--set", "agent_config.max_steps=2", "--set", "agent_config.top_k=2",
                                   "--set", "agent_config.max_top_k=2"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == N and metrics["missing"] == 0
    assert sum(metrics["finish_reasons"].values()) == N
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == {"5a7f6fd75542992e7d278cfa", "5ab48ec25542991779162cdc"}
    for r in rows:
        traj = r["trajectory"]
        assert traj["usage"]["calls"] >= 1 and r["steps"] <= 2 and r["hops"] == 2
        assert r["recall"] is not None  # gold ids resolvable against this KB's passages
        for step in traj["steps"]:
            assert len(step["hits"]) <= 2
    html = (out / "report.html").read_text()
    assert "Hop-aware diagnosis" in html and "<svg" in html
    assert (out / "llm_cache.sqlite").exists()


def test_judge_on_embedded_model_returns_schema_valid_scores():
    from agentrag.eval.judge import LLMJudge
    from agentrag.llm import resolve_llm

    judge = LLMJudge(resolve_llm("embedded"))
    for pred in ("Rush", "The Beatles"):
        verdict = judge.assess("Which band had drummer Neil Peart?", pred, ["Rush"])
        assert verdict.error is None and verdict.score in (0, 1, 2), verdict  # a 135M judge is not accurate
