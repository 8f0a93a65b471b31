"""`agentrag eval --executor ray` on the real embedded model: 2 Ray worker processes, each loading
the model once, give a complete run directory (tiny budget: 2 questions, max_steps 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agentrag
from agentrag.cli.main import app
from agentrag.testing import HashEmbedder
from extras_check import require_module

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_eval_embedded_on_two_ray_workers(data_dir, tmp_path):
    ray = require_module("ray", "ray")
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import pooled_passages

    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = tmp_path / "sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(2)), encoding="utf-8")
    KnowledgeBase.build(pooled_passages([sub]), tmp_path / "kb", KBConfig(method="bm25"),
                        embedder=HashEmbedder(), progress=False)  # BM25 only: no embedder model needed
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(agentrag.__file__).parents[1]),
                                                os.environ.get("PYTHONPATH", "")])
    out = tmp_path / "run"
    try:
        res = CliRunner().invoke(app, ["eval", "--dataset", str(sub), "--kb", str(tmp_path / "kb"),
                                       "--agent", "react", "--llm", "embedded", "--out", str(out),
                                       "--executor", "ray", "--workers", "2", "-j", "2",
                                       "--set", "agent_config.max_steps=2", "--set", "agent_config.top_k=2"])
    finally:
        ray.shutdown()
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["5a7f6fd75542992e7d278cfa", "5ab48ec25542991779162cdc"]
    for r in rows:
        assert r["trajectory"]["usage"]["calls"] >= 1 and r["steps"] <= 2
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 2 and metrics["missing"] == 0
    assert (out / "llm_cache.sqlite").stat().st_size > 0  # workers share the run's cache
