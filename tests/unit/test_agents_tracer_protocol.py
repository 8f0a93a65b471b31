"""plan_step against AgenticRAGTracer's protocol, scored by the real eval runner (issue 9 items 1-2)."""

from __future__ import annotations

import pytest

from agentrag.agents import build_agent
from agentrag.agents.plan_step import plan_step_tools, text_final_answer
from agentrag.agents.prompts import STEP_USER
from agentrag.eval.hops import diagnose
from agentrag.eval.runner import score_item
from agentrag.records import Passage, QAItem, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id=f"p{i}", title=f"T{i}", text=f"fact number {i} about Paris and France") for i in range(30)]
TWO_HOP = QAItem(id="h2", question="Who founded the city where X was born?", golden_answers=["Romulus"], hops=2)


@pytest.fixture
def retriever() -> FakeRetriever:
    return FakeRetriever(PASSAGES)


def rag(query: str = "Paris", topk: int | None = 5) -> ToolCall:
    args: dict[str, object] = {"query": query}
    if topk is not None:
        args["topk"] = topk
    return ToolCall(name="RAG_search", arguments=args)


def final(answer: str) -> ToolCall:
    return ToolCall(name="Final_Answer", arguments={"answer": answer})


def test_a_perfect_two_search_answer_is_two_steps_not_over_extension(retriever):
    llm = ScriptedLLM(["1. birthplace 2. founder", rag("X birthplace"), rag("Rome founder"), final("Romulus")])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    res = score_item(TWO_HOP, traj)
    assert (res.correct, res.steps, res.topk_per_step) == (True, 2, [5, 5])
    d = diagnose([res])
    assert d["steps_c"] == 2.0 and d["collapse_rate"] == 0.0 and d["over_extension_rate"] == 0.0


def test_text_final_answer_is_a_turn_without_tool_call_and_not_a_step(retriever):
    llm = ScriptedLLM(["plan", rag(), rag(), "I now know it.\nFinal_Answer: Romulus\nBecause the docs say so."])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    assert (traj.finish_reason, traj.answer) == ("answered", "Romulus")  # trailing explanation not swallowed
    assert traj.steps[-1].action is None
    assert score_item(TWO_HOP, traj).steps == 2


@pytest.mark.parametrize("text, answer", [
    ("Final_Answer: John F. Kelly", "John F. Kelly"),
    ("Final Answer: Paris.\nExplanation: the documents agree.", "Paris"),
    ("**Final_Answer:** Rome", "Rome"),
    ("Final_Answer:\n  Berlin\n(see doc 2)", "Berlin"),
    ("Final_Answer: Paris. The documents agree on it.", "Paris"),
    ("Final_Answer: St. Louis (Missouri)", "St. Louis (Missouri)"),
    ("Final_Answer: Washington D.C. It is the capital.", "Washington D.C."),
    ("Final_Answer: Washington, D.C.", "Washington, D.C."),
    ("Final Answer: the U.S. Army", "the U.S. Army"),
    ("Final Answer: U.S.", "U.S."),
    ("Final Answer: Austin, Texas", "Austin, Texas"),
    ("Final Answer: 1,200 people", "1,200 people"),
    ("Final Answer: Jean-Paul Sartre", "Jean-Paul Sartre"),
    ("Final Answer: Smith & Sons Inc.", "Smith & Sons Inc."),
    ("Final Answer: Paris, as the documents show", "Paris"),
    ("Final Answer: Paris - the documents say so", "Paris"),
    ("Final Answer: Paris — According to Doc 2", "Paris"),
    ("Final Answer: yes, because both are American", "yes"),
    ("Final Answer: Paris because Doc 1 says so", "Paris"),
    ('Final Answer: "Tottenham Hotspur".', "Tottenham Hotspur"),
    ("The Final Answer: is not known yet. I will search more.", None),
    ("Final Answer:", None),
    ("Final Answer: ...", None),
    ("Final_Answer: Paris.\nThe Final Answer: will follow after one more check.", "Paris"),
    ("no marker here", None),
])
def test_text_final_answer_takes_the_answer_line_only(text, answer):
    assert text_final_answer(text) == answer


def test_a_marker_without_an_answer_does_not_end_the_run(retriever):
    llm = ScriptedLLM(["plan", rag(), "The Final Answer: is not known yet, I need another search.", rag(),
                       "Final_Answer: Romulus, according to Doc 1."])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    assert (traj.finish_reason, traj.answer) == ("answered", "Romulus") and retriever.calls == 2
    assert traj.steps[2].error == "no tool call" and traj.steps[2].action is None


def test_run_ends_right_after_the_tenth_search(retriever):
    llm = ScriptedLLM(["plan"], default=rag())
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    assert traj.finish_reason == "max_steps" and retriever.calls == 10
    assert llm.calls == 1 + 10  # no 11th request
    res = score_item(TWO_HOP, traj)
    assert res.steps == 10 and res.correct is False
    assert diagnose([res])["over_extension_rate"] == 1.0


def test_reask_after_a_reply_without_tool_call_is_the_step_prompt_alone(retriever):
    llm = ScriptedLLM(["plan", "Let me think about what to search.", rag(), final("Romulus")])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    assert traj.answer == "Romulus" and score_item(TWO_HOP, traj).steps == 1
    reask = llm.requests[2]["messages"]
    assert [m.role for m in reask[-3:]] == ["user", "assistant", "user"]
    assert reask[-2].content == "Let me think about what to search." and reask[-1].content == STEP_USER
    assert sum(m.role == "user" and m.content == STEP_USER for m in reask) == 2  # nothing else injected


def test_topk_is_required_default_five_and_not_capped_silently(retriever):
    schema = plan_step_tools()[0]["function"]["parameters"]
    assert schema["required"] == ["query", "topk"] and "maximum" not in schema["properties"]["topk"]
    llm = ScriptedLLM(["plan", rag(topk=None), rag(topk=25), final("x")])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    assert [len(s.hits) for s in traj.steps[1:3]] == [5, 25]  # default 5; 25 served in full
    assert traj.metadata["topk_per_step"] == [5, 25]
    # an explicit cap is stated in the observation, never silent
    llm = ScriptedLLM(["plan", rag(topk=25), final("x")])
    traj = build_agent("plan_step", llm, retriever, max_top_k=8).run(TWO_HOP)
    assert len(traj.steps[1].hits) == 8 and "topk=25 is above this agent's limit of 8" in traj.steps[1].observation


def test_parallel_tool_calls_are_recorded_and_run(retriever):
    llm = ScriptedLLM(["plan", [rag("a", 2), rag("b", 3)], final("Romulus")])
    traj = build_agent("plan_step", llm, retriever).run(TWO_HOP)
    names = [s.action.arguments.get("query") for s in traj.steps if s.action]
    assert names[:2] == ["a", "b"] and traj.metadata["topk_per_step"] == [2, 3]
    assistant = [m for m in traj.messages if m.role == "assistant" and m.tool_calls][0]
    assert [c.arguments["query"] for c in assistant.tool_calls] == ["a", "b"]
    assert [m.tool_call_id for m in traj.messages if m.role == "tool"] == [c.id for c in assistant.tool_calls]
    assert score_item(TWO_HOP, traj).steps == 2


def test_mean_topk_per_step_for_correct_and_incorrect(retriever):
    ok = build_agent("plan_step", ScriptedLLM(["p", rag(topk=8), rag(topk=4), final("Romulus")]), retriever)
    bad = build_agent("plan_step", ScriptedLLM(["p", rag(topk=2), final("Remus")]), retriever)
    rs = [score_item(TWO_HOP, ok.run(TWO_HOP)), score_item(TWO_HOP, bad.run(TWO_HOP))]
    d = diagnose(rs)
    assert (d["topk_c"], d["topk_i"]) == (6.0, 2.0)
