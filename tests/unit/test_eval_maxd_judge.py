"""MaxD as Tracer reports it, sub-question-graph probes, and the judge rubric (issue 9 items 3, 8)."""

from __future__ import annotations

import json

import pytest

from agentrag.agents import build_agent
from agentrag.eval.hops import diagnose, lower_hop_items
from agentrag.eval.judge import JUDGE_SYSTEM, LLMJudge
from agentrag.eval.result import EvalResult
from agentrag.eval.runner import evaluate, expand_items, score_item, summarize
from agentrag.records import Passage, QAItem, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM


def R(id, hops, correct, parent=None, level=None, qtype=None, steps=None):
    return EvalResult(id=id, question="q", golden_answers=["a"], hops=hops, steps=hops if steps is None else steps,
                      correct=correct, parent_id=parent, level=level, metadata={"type": qtype} if qtype else {})


def test_maxd_is_over_three_and_four_hop_questions_only_split_by_type():
    rs = [R("two", 2, False), R("two#L1", 1, True, "two", 1),  # a 2-hop question never enters MaxD
          R("c3", 3, True, qtype="comparison"), R("c3#L1", 1, False, "c3", 1),
          R("i3", 3, False, qtype="inference", steps=6), R("i3#L1", 1, True, "i3", 1), R("i3#L2", 2, True, "i3", 2),
          R("i4", 4, False, qtype="inference", steps=1), R("i4#L1", 1, True, "i4", 1)]
    d = diagnose(rs)
    assert d["maxd"] == pytest.approx((3 + 2 + 1) / 3, abs=1e-4)
    assert d["by_hops"]["2"]["maxd"] is None and d["by_hops"]["2"]["maxd_n"] == 0
    t = d["table2"]
    assert set(t) == {"comparison-3hop", "inference-3hop", "inference-4hop"}
    assert t["comparison-3hop"]["maxd"] == 3.0 and t["inference-3hop"]["maxd"] == 2.0
    assert (t["inference-3hop"]["steps_i"], t["inference-4hop"]["steps_i"]) == (6.0, 1.0)
    # MuSiQue-style data (no comparison/inference type) is split by hops only
    assert set(diagnose([R("m", 3, True, qtype="3hop")])["table2"]) == {"3hop"}


def test_probes_are_only_made_for_three_and_four_hop_questions():
    two = QAItem(id="a", question="q", golden_answers=["x"], hops=2, metadata={"decomposition": [
        {"question": "A >> b", "answer": "B"}, {"question": "#1 >> c", "answer": "x"}]})
    assert [i.id for i in expand_items([two], maxd=True)] == ["a"]


DECOMP_4HOP3 = [  # MuSiQue 4hop3: (1 -> 2) and 3 both feed 4
    {"question": "Jean-Luc Vandenbroucke >> place of birth", "answer": "Mouscron"},
    {"question": "Arrondissement of #1 >> country", "answer": "Belgium"},
    {"question": "where does the dutch reformed church come from", "answer": "the Netherlands"},
    {"question": "What term is used in #2 and the #3 for a Fachhochschule?", "answer": "hogeschool"}]
DECOMP_3HOP2 = [  # 1 and 2 both feed 3
    {"question": "What state is KAGH-FM located?", "answer": "Arkansas"},
    {"question": "McRae >> located in the administrative territorial entity", "answer": "White County"},
    {"question": "Midway, #2 , #1 >> country", "answer": "U.S."}]
DECOMP_4HOP2 = [  # 1 -> 2; 3 on its own; 4 uses 2 and 3
    {"question": "Who performed X?", "answer": "P"},
    {"question": "Where was #1 born?", "answer": "C"},
    {"question": "Which league does Team Y play in?", "answer": "L"},
    {"question": "When did #3 first play in #2?", "answer": "1990"}]


def test_non_chain_musique_probes_follow_the_subquestion_graph():
    item = QAItem(id="m", question="Q", golden_answers=["hogeschool"], hops=4, metadata={"decomposition": DECOMP_4HOP3})
    lows = lower_hop_items(item)
    assert [(x.id, x.golden_answers) for x in lows] == [("m#L1", ["Mouscron"]), ("m#L2", ["Belgium"])]
    assert "(2) What is the country of Arrondissement of #1?" in lows[1].question
    assert "dutch reformed" not in lows[1].question.lower()  # the linear prefix would have been wrong
    item = QAItem(id="t", question="Q", golden_answers=["U.S."], hops=3, metadata={"decomposition": DECOMP_3HOP2})
    lows = lower_hop_items(item)
    # no sub-question needs exactly 2 hops: a linear 2-step prefix is not a real 2-hop question
    assert [(x.id, x.golden_answers) for x in lows] == [("t#L1", ["Arkansas"])]
    item = QAItem(id="f", question="Q", golden_answers=["1990"], hops=4, metadata={"decomposition": DECOMP_4HOP2})
    assert [x.golden_answers for x in lower_hop_items(item)] == [["P"], ["C"]]


def test_probe_references_are_renumbered():
    decomp = [{"question": "A?", "answer": "a"}, {"question": "B?", "answer": "b"},
              {"question": "What about #2?", "answer": "c"}, {"question": "Join #1 and #3", "answer": "d"}]
    item = QAItem(id="r", question="Q", golden_answers=["d"], hops=4, metadata={"decomposition": decomp})
    (l1, l2) = lower_hop_items(item)
    assert l2.golden_answers == ["c"] and "(1) B? (2) What about #1?" in l2.question


def test_tracer_exported_lower_hop_questions_and_type_are_used(tmp_path):
    from agentrag.eval.datasets import load_dataset

    rec = {"id": "t1", "question": "4-hop q?", "golden_answers": ["118,218 entries"],
           "metadata": {"hops": 4, "type": "comparison", "lower_hop_questions": [
               {"level": 2, "question": "2-hop q?", "golden_answers": ["Hipparcos"]},
               {"level": 3, "question": "3-hop q?", "golden_answers": ["Hipparcos catalogue"]}]}}
    path = tmp_path / "tracer.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    (item,) = load_dataset(path)
    assert [x.id for x in expand_items([item], maxd=True)] == ["t1", "t1#L2", "t1#L3"]
    res = score_item(item, build_agent("plan_step", ScriptedLLM(["p", ToolCall(name="Final_Answer", arguments={
        "answer": "no idea"})]), FakeRetriever([Passage(id="a", text="x")])).run(item))
    assert res.metadata["type"] == "comparison" and res.hops == 4


# ------------------------------------------------------------------------------ judge rubric
# (graded pairs that can fail when the rubric changes: tests/unit/test_eval_judge_rubric.py)


def test_rubric_text_states_each_score():
    text = JUDGE_SYSTEM.lower()
    assert "2 - equivalent" in text
    assert "1 - the prediction contains all the key information" in text and "does not contradict" in text
    assert "missing or less precise" in text and "0 - otherwise" in text


def test_judge_failure_is_judge_error_never_em(tmp_path):
    from agentrag.errors import LLMError

    judge = LLMJudge(ScriptedLLM(["not json at all", "still no verdict", LLMError("judge down", is_retryable=True)]))
    qs = [QAItem(id=f"j{i}", question="Who founded Rome?", golden_answers=["Romulus"], hops=2) for i in range(3)]
    agent_llm = ScriptedLLM(["p", ToolCall(name="Final_Answer", arguments={"answer": "Romulus"})], cycle=True)
    agent = build_agent("plan_step", agent_llm, FakeRetriever([Passage(id="a", text="x")]))
    results = evaluate(agent, qs, tmp_path, judge=judge, concurrency=1)
    # unreadable judge output is a judge_error (no verdict, never EM); a judge outage leaves the item pending
    assert len(results) == 2 and list(json.loads((tmp_path / "unfinished.json").read_text())) == ["j2"]
    assert all(r.em == 1.0 and r.correct is None and r.judge is None and r.judge_error for r in results)
    m = summarize(results)
    assert m["judge_errors"] == 2 and m["judge_pass"] is None
    assert m["hops"]["accuracy"] is None and m["hops"]["unjudged"] == 2  # not counted as correct by EM

    healthy = LLMJudge(ScriptedLLM(['{"reason": "same", "score": 2}']))
    rerun = evaluate(agent, qs, tmp_path, judge=healthy, concurrency=1)
    assert healthy.llm.calls == 1 and {r.id: r.judge for r in rerun}["j2"] == 2
