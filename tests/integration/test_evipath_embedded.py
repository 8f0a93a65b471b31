"""EviPath on the embedded model: 2 shared MuSiQue items end to end through the CLI (an honest
funnel: a 135M model may get every item rejected; every item must be accounted for with its
reason), a rerun that pays no LLM call again, and `agentrag train sft` for 2 steps on an EviPath
export (the embedded run's if it exported anything, else a gold-fake run's)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from rerun_check import rerun_pays_nothing

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SETTINGS = ["planner.max_tokens=96", "planner.max_iterations=3", "executor.max_tokens=96",
            "executor.max_fact_chars=200", "concurrency=2"]


def _synth(dataset: Path, out: Path) -> dict:
    args = ["synth", "evipath", "--dataset", str(dataset), "--llm", "embedded", "--limit", "2", "--out", str(out)]
    for s in SETTINGS:
        args += ["--set", s]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads((out / "metrics.json").read_text())


def test_embedded_two_musique_items_honest_funnel_and_resume(data_dir: Path, tmp_path: Path) -> None:
    dataset = data_dir / "musique" / "train_100.jsonl"
    out = tmp_path / "run"
    m = _synth(dataset, out)
    funnel = {r["stage"]: r for r in m["funnel"]}
    assert funnel["items"]["out"] == 2
    plans = funnel["plans"]
    assert plans["in"] == 2 and plans["out"] + sum(plans["rejected"].values()) == 2
    paths = funnel["paths"]  # an item is counted at the stage that rejected it: paths read the plans kept
    assert paths["in"] == plans["out"] and paths["out"] + sum(paths["rejected"].values()) == paths["in"]
    gates = [json.loads(x) for x in (out / "gates.jsonl").read_text().splitlines()]
    assert len(gates) == 2  # every item reached the gates, passed or with reasons
    for g in gates:
        assert g["passed"] or (g["reasons"] and all(":" in r for r in g["reasons"]))
    for stage in ("plans", "iterations"):
        for line in (out / f"{stage}.jsonl").read_text().splitlines():
            rec = json.loads(line)
            assert rec["provenance"]["model"] and (rec["status"] == "ok" or rec["reason"])
    assert m["llm_per_item"]["calls"] >= 1 and m["llm"]["planner+executor"]["misses"] >= 2
    rerun_pays_nothing(out, lambda: _synth(dataset, out))  # resume: all done, no call, the record kept
    assert len((out / "gates.jsonl").read_text().splitlines()) == 2


def test_train_sft_on_an_evipath_export(data_dir: Path, tmp_path: Path) -> None:
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from evipath_fakes import CleanGoldLLM, ContentWordEmbedder  # gold data that passes the support gates

    dataset = data_dir / "musique" / "train_100.jsonl"
    records = [json.loads(x) for x in dataset.read_text().splitlines()[:2]]
    # the short planner chats keep the 2 CPU steps cheap
    cfg = EviPathRunConfig(datasets=[str(dataset)], limit=2, split="planner")
    m = run_evipath(cfg, tmp_path / "gold", planner=CleanGoldLLM(records), embedder=ContentWordEmbedder())
    assert m["export"].get("exported", 0) >= 1, m.get("gate_failures")
    data = tmp_path / "gold" / "sft" / "trl_sft.jsonl"
    res = CliRunner().invoke(app, ["train", "sft", "--data", str(data), "--out", str(tmp_path / "train"),
                                   "--model", "embedded", "--max-steps", "2", "--set", "max_length=512",
                                   "--set", "learning_rate=1e-4"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "train" / "metrics.json").read_text())
    assert metrics["global_step"] == 2 and len(metrics["losses"]) == 2
    assert all(math.isfinite(x) and x > 0 for x in metrics["losses"])
    assert 0 < metrics["trained_tokens"] < metrics["tokens"]  # system, question and observations masked


def test_eval_planner_executor_agent_on_the_embedded_model(data_dir: Path, tmp_path: Path) -> None:
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import pooled_passages

    src = data_dir / "musique" / "train_100.jsonl"
    sub = tmp_path / "one.jsonl"
    sub.write_text(src.read_text().splitlines()[0] + "\n")
    KnowledgeBase.build(pooled_passages([sub]), tmp_path / "kb", KBConfig(), progress=False)
    res = CliRunner().invoke(app, ["eval", "--dataset", str(sub), "--kb", str(tmp_path / "kb"), "--agent",
                                   "planner_executor", "--llm", "embedded", "--out", str(tmp_path / "eval"),
                                   "--set", "agent_config.max_steps=2", "--set", "agent_config.top_k=2",
                                   "--set", "agent_config.max_tokens=96",
                                   "--set", "agent_config.executor_max_tokens=64"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    traj = rows[0]["trajectory"]
    assert traj["agent"] == "planner_executor"
    reason = traj["finish_reason"]  # whichever the 135M model reaches, the trajectory must agree with it
    if reason == "answered":
        assert traj["answer"]
    elif reason == "parse_error":
        assert traj["steps"] and traj["steps"][-1]["error"]
    else:
        assert reason in ("no_answer", "max_steps"), reason
    assert traj["metadata"]["topk_per_step"] == [2] * rows[0]["steps"]  # top-k of every retrieval recorded
    assert rows[0]["steps"] == sum(1 for s in traj["steps"] if s["action"])  # one step per retrieval
