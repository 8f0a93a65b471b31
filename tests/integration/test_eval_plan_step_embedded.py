"""`agentrag eval --agent plan_step` on the real embedded model over one shared MuSiQue question."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_eval_plan_step_embedded_musique(data_dir, tmp_path):
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import gold_passages, pooled_passages

    src = data_dir / "musique" / "train_100.jsonl"
    sub = tmp_path / "musique_1.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text(next(fh), encoding="utf-8")
    KnowledgeBase.build(pooled_passages([sub]), tmp_path / "kb", KBConfig(), gold=gold_passages(sub), progress=False)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--dataset", str(sub), "--kb", str(tmp_path / "kb"), "--agent",
                                   "plan_step", "--llm", "embedded", "--out", str(out), "-j", "1",
                                   "--set", "agent_config.max_steps=2", "--set", "agent_config.top_k=2",
                                   "--set", "agent_config.max_top_k=3", "--set", "agent_config.max_tokens=128",
                                   "--set", "agent_config.max_turns_without_tool=1"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 1 and metrics["unfinished"] == 0
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    traj = row["trajectory"]
    # only retrieval calls are steps, each with its top-k; the run never passes max_steps searches
    assert row["steps"] == len(traj["metadata"]["topk_per_step"]) <= 2
    assert all(1 <= k <= 3 for k in row["topk_per_step"])
    assert traj["finish_reason"] in {"answered", "no_answer", "max_steps", "parse_error"}
