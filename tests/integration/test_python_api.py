"""Everything the CLI does, from Python alone: build a KB from the shared data, evaluate an agent
on it, and run each of the four synthesizers, with LLM and retriever *objects* (the embedded model
and the KB just built). Tiny budgets: a 135M model rarely passes a gate, so what must hold is the
shape of what each call returns and writes, and that nothing is left unfinished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrag import build_kb, run_eval, run_evipath, run_ragshaper, run_reasonrag, run_tracer
from agentrag.config import _deep_merge
from agentrag.eval import EvalConfig, load_dataset
from agentrag.llm import resolve_llm
from agentrag.synth.evipath import EviPathRunConfig
from agentrag.synth.ragshaper.config import RagShaperRunConfig, load_preset
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.synth.tracer.config import TracerRunConfig

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DRIVER_KEYS = {"synthesizer", "name", "funnel", "unfinished", "unfinished_by_stage", "unfinished_items", "bugs",
               "llm", "wall_s", "export"}


@pytest.fixture(scope="module")
def world(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("api")
    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = root / "hotpot_4.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(4)), encoding="utf-8")
    kb = build_kb([sub], root / "kb", progress=False)  # format detected, gold ids collected
    return {"root": root, "sub": sub, "kb": kb, "llm": resolve_llm("embedded", cache=root / "cache.sqlite"),
            "musique": data_dir / "musique" / "train_100.jsonl"}


def _check_synth(m: dict[str, Any], out: Path, name: str) -> None:
    assert DRIVER_KEYS <= set(m) and m["synthesizer"] == name
    assert m["unfinished"] == 0 and m["bugs"] == 0 and m["llm"], m
    assert all({"stage", "input", "output", "in", "out", "rejected", "unfinished"} <= set(r) for r in m["funnel"])
    assert json.loads((out / "metrics.json").read_text())["synthesizer"] == name
    assert "LLM usage" in (out / "report.md").read_text()


def test_kb_build_and_eval_from_python(world: dict[str, Any]) -> None:
    kb = world["kb"]
    assert len(kb) > 20 and kb.search(["Who directed the film?"], 3)[0]
    out = world["root"] / "eval"
    cfg = EvalConfig(dataset=str(world["sub"]), agent="react", limit=1, concurrency=1,
                     agent_config={"top_k": 2, "max_top_k": 2, "max_steps": 2, "max_tokens": 96})
    m = run_eval(cfg, out, llm=world["llm"], retriever=kb)
    assert m["n"] == 1 and m.get("unfinished", 0) == 0 and "llm" in m
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


def test_each_synthesizer_from_python(world: dict[str, Any]) -> None:
    llm, kb, root = world["llm"], world["kb"], world["root"]
    title = kb.sample_titles(1, seed=0)[0]

    rs = RagShaperRunConfig.model_validate(_deep_merge(load_preset("demo"), {
        "curator": {"max_depth": 1, "p_branch": 0.0, "max_tokens": 96, "max_observation_chars": 200},
        "distractors": {"docs_per_call": 1, "max_tokens": 128}, "qa": {"max_tokens": 256},
        "elicit": {"max_steps": 2, "max_tokens": 96}, "concurrency": 1}))
    m = run_ragshaper(rs, root / "ragshaper", llm=llm, main_kb=kb, seeds=[title])
    _check_synth(m, root / "ragshaper", "ragshaper")

    ep = EviPathRunConfig.model_validate({"datasets": [str(world["musique"])], "limit": 1, "concurrency": 1,
                                          "planner": {"max_tokens": 96, "max_iterations": 2},
                                          "executor": {"max_tokens": 96, "max_fact_chars": 200}})
    m = run_evipath(ep, root / "evipath", llm=llm, retriever=kb)
    _check_synth(m, root / "evipath", "evipath")

    questions = load_dataset(str(world["sub"]), limit=1)
    rr = ReasonRagRunConfig.model_validate({"concurrency": 1, "mcts": {"iterations": 2, "max_iter": 2,
                                                                         "max_tokens": 48}})
    m = run_reasonrag(rr, root / "reasonrag", llm=llm, retriever=kb, questions=questions)
    _check_synth(m, root / "reasonrag", "reasonrag")

    tr = TracerRunConfig.model_validate({"docs": 1, "max_hops": 2, "concurrency": 1,
                                         "compose": {"candidates_per_hop": 1}})
    m = run_tracer(tr, root / "tracer", llm=llm, kb=kb)
    _check_synth(m, root / "tracer", "tracer")
