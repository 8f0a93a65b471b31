from __future__ import annotations

import json
from typing import Any

import pytest

from agentrag.records import Trajectory
from agentrag.synth.ragshaper.config import QAConfig
from agentrag.synth.ragshaper.filter import filter_trajectory
from agentrag.synth.ragshaper.qa import answer_in_question, check_qa, sentence_count, synthesize_qa
from agentrag.synth.ragshaper.schema import PathRecord, TreeNode
from agentrag.testing import ScriptedLLM

STEPS = [{"hop": i, "fact": f"f{i}", "evidence": f"e{i}", "output": f"o{i}"} for i in range(1, 4)]


def _qa(**kw: Any) -> dict[str, Any]:
    base = {"question": "Which year was the bridge of the founder's company finished?", "answer": "1901",
            "reasoning_steps": STEPS, "negative_aspect": []}
    base.update(kw)
    return base


def test_a_good_pair_is_accepted() -> None:
    assert check_qa(_qa(), QAConfig()) is None
    assert check_qa(_qa(answer="The U.S. Army Corps of Engineers"), QAConfig()) is None


@pytest.mark.parametrize("obj,reason", [
    (None, "schema_failure"),
    (_qa(question=""), "schema_failure"),
    (_qa(answer=None), "schema_failure"),
    (_qa(reasoning_steps="three hops"), "schema_failure"),
    (_qa(answer="the bridge"), "answer_in_question"),
    (_qa(answer="Bridge!"), "answer_in_question"),
    (_qa(reasoning_steps=STEPS[:2]), "too_few_hops"),
    (_qa(reasoning_steps=[*STEPS[:2], {"hop": 3, "fact": "f3", "evidence": ""}]), "too_few_hops"),
    (_qa(answer="It was 1901. Work began in 1899."), "answer_too_long"),
    (_qa(answer=" ".join(["word"] * 25)), "answer_too_long"),
])
def test_rejection_reasons(obj: dict[str, Any] | None, reason: str) -> None:
    got = check_qa(obj, QAConfig())
    assert got is not None and got.startswith(reason), got


def test_helpers() -> None:
    assert answer_in_question("Who founded Lysa?", "lysa")
    assert not answer_in_question("Who founded Lysander Town?", "Lysa")
    assert sentence_count("1901") == 1
    assert sentence_count("Born in 1901. Died in 1950.") == 2


def _path() -> tuple[PathRecord, list[TreeNode]]:
    nodes = [TreeNode(id="n0", observation="Ada"), TreeNode(id="n1", parent="n0", depth=1, intent="hop")]
    return PathRecord(id="s-n1", seed_id="s", seed="Ada", node_ids=["n0", "n1"], score=0, rank=0), nodes


def test_synthesize_qa_records_schema_failure_with_raw_output() -> None:
    path, nodes = _path()
    rec = synthesize_qa(ScriptedLLM(["{broken"]), path, nodes, QAConfig())
    assert rec.status == "rejected" and rec.reason and rec.reason.startswith("schema_failure")
    assert rec.provenance.raw_output == "{broken" and rec.provenance.stage == "qa"


def test_synthesize_qa_names_truncation_at_max_tokens() -> None:
    from agentrag.llm.base import Completion

    path, nodes = _path()
    cut = '{"question": "Who?", "reasoning_steps": [{"hop": 1, "fact": "a", "evidence": "b"}, {"hop": 2, "fa'
    rec = synthesize_qa(ScriptedLLM([Completion(text=cut, finish_reason="length")]), path, nodes,
                        QAConfig(max_tokens=40))
    assert rec.status == "rejected"
    assert rec.reason == ("schema_failure: parse_error: output cut off at max_tokens=40 before the JSON "
                          "object closed")
    assert rec.provenance.raw_output == cut


def test_synthesize_qa_accepts_and_keeps_provenance() -> None:
    path, nodes = _path()
    rec = synthesize_qa(ScriptedLLM([json.dumps(_qa())], model="m"), path, nodes, QAConfig())
    assert rec.status == "accepted" and rec.reason is None and rec.answer == "1901"
    assert rec.id == "s-n1-qa" and rec.provenance.model == "m" and len(rec.provenance.prompt_hash) == 16


@pytest.mark.parametrize("pred,kept", [
    ("1901", True), ("the 1901", True), ("In 1901", False), ("1900", False), (None, False),
    ("Orn river bridge", False),
])
def test_f1_filter_keeps_only_above_0_9(pred: str | None, kept: bool) -> None:
    traj = Trajectory(id="t", question="q", answer=pred, metadata={"qa_id": "q1"})
    gold = "1901" if pred != "Orn river bridge" else "The Orn bridge"
    rec = filter_trajectory(traj, gold, 0.9)
    assert rec.kept is kept
    assert (rec.reason is None) is kept


def test_f1_filter_threshold_is_strict() -> None:
    # F1 of "a b c d e f g h i" vs "a b c d e f g h i j" = 2*1*0.9/1.9 = 0.947 > 0.9; 9 of 11 = 0.9 exactly
    traj = Trajectory(id="t", question="q", answer="w1 w2 w3 w4 w5 w6 w7 w8 w9")
    assert filter_trajectory(traj, "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10", 0.9).kept
    traj2 = Trajectory(id="t", question="q", answer="w1 w2 w3 w4 w5 w6 w7 w8 w9 x")
    assert filter_trajectory(traj2, "w1 w2 w3 w4 w5 w6 w7 w8 w9 y", 0.9).f1 == 0.9
    assert not filter_trajectory(traj2, "w1 w2 w3 w4 w5 w6 w7 w8 w9 y", 0.9).kept
