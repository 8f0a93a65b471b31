"""The loop's three arms (scripts/loop.sh, docs/loop.md), their plumbing on fakes: the EviPath arm's
training file holds planner and executor conversations that parse with the planner_executor agent's
protocol; the ReasonRAG arm's SFT policy data is the reason_ground agent's rounds and its DPO input
is the pairs of a `synth reasonrag` run; the token budgets match; the script refuses bad sizes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from test_annotated_teacher import MUSIQUE, TWOWIKI, _passages, _write
from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM, parse_executor, parse_planner
from agentrag.agents.prompts import GROUNDING_SYSTEM, REASONING_SYSTEM
from agentrag.agents.reason_ground import parse_step
from agentrag.export.dpo import read_trl_dpo
from agentrag.export.sft import read_trl_records
from agentrag.records import PreferencePair
from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.testing import FakeRetriever, ScriptedLLM
from agentrag.train.budget import matched_steps

ROOT = Path(__file__).resolve().parents[2]
LOOP = ROOT / "scripts" / "loop.sh"


def _teacher(tmp: Path) -> Path:
    files = [_write(tmp, "mus_train.jsonl", [MUSIQUE]), _write(tmp, "wiki_train.jsonl", [TWOWIKI])]
    run_annotated(AnnotatedRunConfig(datasets=files, top_k=2, doc_chars=80), tmp / "synth",
                  retriever=FakeRetriever(_passages()))
    return tmp / "synth"


def test_evipath_arm_trains_on_planner_and_executor_chats_that_parse_with_the_agents_protocol(tmp_path: Path) -> None:
    out = _teacher(tmp_path)
    records = read_trl_records(out / "sft_planner_executor" / "trl_sft.jsonl")  # train sft's reader
    roles = [r["messages"][0]["content"] for r in records]
    # the 2Wiki path states a citizenship only as "French": EviPath's gates would reject its executor
    # chat, so the teacher leaves that path out of this export and counts it
    assert roles.count(PLANNER_SYSTEM) == 1 and roles.count(EXECUTOR_SYSTEM) == 2 and len(roles) == 3
    pe = json.loads((out / "metrics.json").read_text())["export"]["planner_executor"]
    assert pe["dropped"] == {"sub_answer_support": 1}
    for rec in records:
        assert not rec["tools"]  # a text protocol: no tool schema rendered
        turns = [m["content"] for m in rec["messages"] if m["role"] == "assistant"]
        if rec["messages"][0]["content"] == PLANNER_SYSTEM:
            parsed = [parse_planner(t) for t in turns]
            assert all(p.error is None for p in parsed)
            assert all(p.searches and p.answer is None for p in parsed[:-1]) and parsed[-1].answer
        else:
            (turn,) = turns
            out = parse_executor(turn)
            assert out.error is None and out.select and out.answer


def test_reasonrag_arm_policy_data_is_reason_ground_rounds(tmp_path: Path) -> None:
    records = read_trl_records(_teacher(tmp_path) / "sft_reason_ground" / "trl_sft.jsonl")
    assert {r["messages"][0]["content"] for r in records} == {REASONING_SYSTEM, GROUNDING_SYSTEM}
    actions = [parse_step(r["messages"][-1]["content"]).action for r in records]
    assert actions.count("answer") == 2 and actions.count("query") == actions.count("evidence") == 4


def test_reasonrag_arm_dpo_input_is_the_pairs_of_a_synth_reasonrag_run(tmp_path: Path) -> None:
    cfg = config(mcts=config().mcts.model_copy(update={"doc_chars": 40}))
    metrics = run_reasonrag(cfg, tmp_path / "rr", llm=ScriptedLLM(default=policy), retriever=retriever(),
                            questions=[QUESTION])
    pairs = [PreferencePair.model_validate_json(x) for x in (tmp_path / "rr" / "pairs.jsonl").read_text().splitlines()]
    dpo = read_trl_dpo(tmp_path / "rr" / "dpo" / "trl_dpo.jsonl")  # what `agentrag train dpo` reads
    assert pairs and len(dpo) == len(pairs) == metrics["funnel"][-1]["out"]
    for pair, rec in zip(pairs, dpo, strict=True):
        assert rec["chosen"][0]["content"] == pair.chosen[0].content != rec["rejected"][0]["content"]
        assert rec["prompt"][0]["content"] in (REASONING_SYSTEM, GROUNDING_SYSTEM)  # the agent's rounds
        assert parse_step(rec["chosen"][0]["content"]).action is not None


def test_matched_steps_give_both_datasets_the_same_token_budget() -> None:
    out = matched_steps([100, 300], [50, 50, 50, 50], reference_steps=10, batch=2)
    assert out["token_budget"] == 10 * 2 * 200 and out["steps"] == 40 and out["tokens"] == 40 * 2 * 50
    assert out["epochs"] == {"reference": 10.0, "data": 20.0}
    epoch = matched_steps([100] * 5, [250] * 3, reference_steps=-1, batch=2)  # -1: one epoch of the reference
    assert epoch["reference_steps"] == 3 and epoch["steps"] == round(3 * 200 / 500)
    assert matched_steps([10], [10_000], 1, 1)["steps"] == 1
    with pytest.raises(ValueError):
        matched_steps([], [1], 1, 1)


def _script_env(tmp: Path, **over: str) -> dict[str, str]:
    return {**os.environ, "AGENTRAG_SHARED": os.environ.get("AGENTRAG_SHARED", str(ROOT.parent / "shared")),
            "AG": "false", "PY": "false", **over}


@pytest.mark.parametrize(("over", "message"), [
    ({"ARMS": "react dpo"}, "unknown arm 'dpo'"),
    ({"ARMS": "evipath"}, "need the react arm"),
])
def test_loop_script_refuses_bad_arms_before_any_work(tmp_path: Path, over: dict[str, str], message: str) -> None:
    proc = subprocess.run(["bash", str(LOOP), str(tmp_path / "out")], env=_script_env(tmp_path, **over),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (tmp_path / "out").exists()


def test_loop_script_refuses_an_unknown_eval_dataset(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    for f in ("musique/train_397.jsonl", "2wikimultihopqa/train_600.jsonl"):
        (shared / "data" / f).parent.mkdir(parents=True, exist_ok=True)
        (shared / "data" / f).write_text("{}\n")
    proc = subprocess.run(["bash", str(LOOP), str(tmp_path / "out")], capture_output=True, text=True, timeout=60,
                          env=_script_env(tmp_path, AGENTRAG_SHARED=str(shared), EVAL_SLICES="nq:1-5"))
    assert proc.returncode == 2 and "unknown dataset 'nq'" in proc.stderr


def test_loop_script_configs_are_valid_for_their_commands() -> None:
    """The YAML the script writes for the MCTS loads as ReasonRagRunConfig (typo'd keys fail at load)."""
    text = LOOP.read_text()
    body = text.split('cat > "$OUT/reasonrag.yaml" <<YAML\n', 1)[1].split("\nYAML\n", 1)[0]
    for var, value in (("$RR_ITERATIONS", "4"), ("$RG_STEPS", "10"), ("$TOP_K", "3"), ("$DOC_CHARS", "200"),
                       ("$MAX_TOKENS", "96"), ("$RR_ROLLOUTS", "1")):
        body = body.replace(var, value)
    cfg = ReasonRagRunConfig.model_validate(yaml.safe_load(body))
    assert cfg.mcts.doc_chars == 200 and cfg.mcts.max_iter == 10 and cfg.value.kind == "spre"
    assert json.dumps(cfg.model_dump())  # plain data
