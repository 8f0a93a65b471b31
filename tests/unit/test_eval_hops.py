from __future__ import annotations

import pytest

from agentrag.eval.hops import chain_question, diagnose, lower_hop_items
from agentrag.eval.result import EvalResult
from agentrag.records import QAItem


def R(id, hops, steps, correct, parent=None, level=None, em=None):
    return EvalResult(id=id, question="q", golden_answers=["a"], hops=hops, steps=steps, correct=correct,
                      em=float(correct if em is None else em), parent_id=parent, level=level)


def test_steps_collapse_overextension_by_hops():
    rs = [R("a", 2, 2, True), R("b", 2, 1, False), R("c", 2, 4, False), R("d", 3, 3, True), R("e", 3, 5, False),
          R("f", None, 1, True)]
    d = diagnose(rs)
    assert d["n"] == 6
    assert d["accuracy"] == pytest.approx(3 / 6, abs=1e-4)
    assert d["steps_c"] == pytest.approx((2 + 3 + 1) / 3, abs=1e-4)
    assert d["steps_i"] == pytest.approx((1 + 4 + 5) / 3, abs=1e-4)
    # over the 5 items with a hop count: b collapses; c and e over-extend
    assert d["collapse_rate"] == 0.2 and d["over_extension_rate"] == 0.4
    assert d["collapse_rate_incorrect"] == pytest.approx(1 / 3, abs=1e-4)
    assert d["over_extension_rate_incorrect"] == pytest.approx(2 / 3, abs=1e-4)
    assert d["by_hops"]["2"]["n"] == 3 and d["by_hops"]["2"]["accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert d["by_hops"]["3"]["steps_c"] == 3.0 and d["by_hops"]["3"]["steps_i"] == 5.0
    assert d["step_histogram"] == {"1": 2, "2": 1, "3": 1, "4": 1, "5": 1}
    assert d["maxd"] is None
    assert diagnose([R("a", 2, 1, True), R("b", 2, 4, False)])["step_histogram"] == {"1": 1, "2": 0, "3": 0, "4": 1}
    assert diagnose([])["step_histogram"] == {} and diagnose([])["accuracy"] is None


def test_maxd_follows_tracer_definition():
    rs = [
        R("x", 4, 4, True), R("x#L1", 1, 1, False, "x", 1),  # solved itself -> depth 4 regardless of probes
        R("y", 4, 2, False), R("y#L1", 1, 1, True, "y", 1), R("y#L2", 2, 2, True, "y", 2),
        R("y#L3", 3, 3, False, "y", 3),  # highest correct lower-hop level: 2
        R("z", 3, 1, False), R("z#L1", 1, 1, False, "z", 1), R("z#L2", 2, 1, False, "z", 2),  # none -> 0
        R("w", 3, 3, False),  # no probes -> not counted
    ]
    d = diagnose(rs)
    assert d["n"] == 4  # probes are not main questions
    assert d["maxd"] == pytest.approx((4 + 2 + 0) / 3, abs=1e-4)
    assert d["by_hops"]["4"]["maxd"] == 3.0 and d["by_hops"]["3"]["maxd"] == 0.0
    assert d["by_hops"]["3"]["maxd_n"] == 1


def test_lower_hop_items_from_musique_decomposition():
    item = QAItem(id="m1", question="Q", golden_answers=["NC"], hops=3, metadata={"decomposition": [
        {"question": "Hello Love >> performer", "answer": "Hank Snow"},
        {"question": "What city did #1 live when he died?", "answer": "Tennessee"},
        {"question": "Which state borders #2 to the east?", "answer": "North Carolina"}]})
    lows = lower_hop_items(item)
    assert [x.id for x in lows] == ["m1#L1", "m1#L2"]
    assert lows[0].question == "What is the performer of Hello Love?" and lows[0].golden_answers == ["Hank Snow"]
    assert "(2) What city did #1 live when he died?" in lows[1].question
    assert lows[1].golden_answers == ["Tennessee"] and lows[1].metadata == {"lower_hop_parent": "m1", "lower_hop_level": 2}
    assert lower_hop_items(QAItem(id="h", question="q", golden_answers=["a"], hops=2)) == []


def test_lower_hop_items_explicit():
    item = QAItem(id="t", question="Q", golden_answers=["a"], hops=3, metadata={"lower_hop_questions": [
        {"level": 2, "question": "two hop?", "golden_answers": ["b"]}]})
    (low,) = lower_hop_items(item)
    assert low.id == "t#L2" and low.hops == 2 and low.golden_answers == ["b"]


def test_chain_question_single_step():
    assert chain_question(["Who wrote Brand"]) == "Who wrote Brand?"
