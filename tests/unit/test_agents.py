"""The four agent protocols under ScriptedLLM: happy path and every kind of misbehaviour."""

from __future__ import annotations

import pytest

from agentrag.agents import build_agent
from agentrag.agents.prompts import (
    FORCE_ANSWER,
    GROUNDING_SYSTEM,
    REACT_FORCE_ANSWER,
    REASONING_SYSTEM,
    SEARCH_R1_INVALID,
    STEP_USER,
)
from agentrag.errors import ContextLimitError, LLMError, ParseError
from agentrag.llm.base import Completion
from agentrag.records import Passage, QAItem, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [
    Passage(id="p1", title="Paris", text="Paris is the capital and largest city of France."),
    Passage(id="p2", title="Berlin", text="Berlin is the capital of Germany."),
    Passage(id="p3", title="Seine", text="The Seine flows through Paris into the English Channel."),
    Passage(id="p4", title="Loire", text="The Loire is the longest river in France."),
]
ITEM = QAItem(id="q1", question="What is the capital of France?", golden_answers=["Paris"])
VALID = {"answered", "max_steps", "no_answer", "parse_error", "llm_error", "context_limit"}


@pytest.fixture
def retriever() -> FakeRetriever:
    return FakeRetriever(PASSAGES, kb="wiki")


def search(query: str = "capital of France", **extra: object) -> ToolCall:
    return ToolCall(name="dense_search", arguments={"query": query, **extra})


# ------------------------------------------------------------------------------------- react
def test_react_happy_path(retriever):
    llm = ScriptedLLM([search(top_k=2), "France's capital is Paris. <answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert len(traj.steps) == 2 and traj.steps[0].action is not None
    assert traj.steps[0].action.arguments["query"] == "capital of France"
    assert [h.id for h in traj.steps[0].hits][0] == "p1" and len(traj.steps[0].hits) == 2
    assert all(h.kb == "wiki" for h in traj.steps[0].hits)
    obs = traj.steps[0].observation or ""
    assert obs.startswith("Doc 1 (Title: Paris) Paris is the capital") and "wiki" not in obs
    assert llm.requests[0]["tools"][0]["function"]["name"] == "dense_search"
    second = llm.requests[1]["messages"]
    assert second[-1].role == "tool" and second[-1].content == obs
    assert second[-2].tool_calls[0].id == second[-1].tool_call_id
    assert traj.usage.calls == 2 and traj.elapsed > 0 and traj.model == "scripted"
    assert traj.messages[-1].content == "France's capital is Paris. <answer>Paris</answer>"


def test_react_malformed_tool_call_is_fed_back(retriever):
    bad = 'Let me search. <tool_call>{"name": "dense_search", "arguments": {"query": </tool_call>'
    llm = ScriptedLLM([bad, search(), "<answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered"
    assert "not valid JSON" in (traj.steps[0].error or "")
    assert llm.requests[1]["messages"][-1].role == "user"
    assert "not valid JSON" in llm.requests[1]["messages"][-1].content
    assert traj.steps[1].hits and retriever.calls == 1


def test_react_tool_call_written_as_text_is_executed(retriever):
    text = 'Thinking. <tool_call>{"name": "dense_search", "arguments": {"query": "Berlin"}}</tool_call>'
    traj = build_agent("react", ScriptedLLM([text, "<answer>Berlin</answer>"]), retriever).run(ITEM)
    assert traj.steps[0].action is not None and traj.steps[0].thought == "Thinking."
    assert traj.steps[0].hits[0].id == "p2"


@pytest.mark.parametrize("call, fragment", [
    (ToolCall(name="dense_search", arguments={"top_k": 3}), "'query' must be a non-empty string"),
    (ToolCall(name="dense_search", arguments={"query": "x", "top_k": "many"}), "top_k must be a positive integer"),
    (ToolCall(name="web_search", arguments={"query": "x"}), "unknown tool 'web_search'"),
])
def test_react_bad_arguments_become_error_observations(retriever, call, fragment):
    llm = ScriptedLLM([call, "<answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered"
    assert fragment in (traj.steps[0].error or "")
    assert traj.steps[0].observation == f"Error: {traj.steps[0].error}"
    assert retriever.calls == 0


def test_react_no_answer_and_max_steps(retriever):
    traj = build_agent("react", ScriptedLLM(["I give up. <answer> </answer>"]), retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("no_answer", None)
    llm = ScriptedLLM(default=search())
    traj = build_agent("react", llm, retriever, max_steps=3, force_answer=False).run(ITEM)
    assert traj.finish_reason == "max_steps" and len(traj.steps) == 3 and llm.calls == 3
    assert retriever.calls == 3
    # with force_answer the last turn offers no tools; a model that still calls one gets no answer
    traj = build_agent("react", ScriptedLLM(default=search()), retriever, max_steps=3).run(ITEM)
    assert traj.finish_reason == "max_steps" and len(traj.steps) == 3 and retriever.calls == 5
    assert traj.steps[-1].error == "no answer in the final (forced) turn"


def test_react_forced_answer_turn(retriever):
    llm = ScriptedLLM([search(), search("Paris"), "It must be Paris."])
    traj = build_agent("react", llm, retriever, max_steps=3).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("max_steps", None)  # untagged text is never the answer
    assert llm.requests[2]["tools"] is None and llm.requests[1]["tools"] is not None
    assert llm.requests[2]["messages"][-1].content == REACT_FORCE_ANSWER
    traj = build_agent("react", ScriptedLLM([search(), "<answer>Paris</answer>"]), retriever, max_steps=2).run(ITEM)
    assert traj.answer == "Paris" and len(traj.steps) == 2


def test_react_repeated_malformed_output_ends_with_parse_error(retriever):
    llm = ScriptedLLM(default=Completion(text="", tool_calls=[]))
    traj = build_agent("react", llm, retriever, max_format_errors=2).run(ITEM)
    assert traj.finish_reason == "parse_error" and len(traj.steps) == 2
    assert all(s.error == "empty reply" for s in traj.steps)


def test_react_backend_parse_error_is_a_malformed_turn(retriever):
    llm = ScriptedLLM([ParseError("bad json"), "<answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered" and "bad json" in (traj.steps[0].error or "")


def test_react_untagged_answer_policy(retriever):
    traj = build_agent("react", ScriptedLLM(["Paris"]), retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("no_answer", None) and len(traj.steps) == 1
    assert traj.steps[0].error == "no tool call and no <answer> tags" and "answer_tagged" not in traj.metadata
    llm = ScriptedLLM(["Paris", "<answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever, untagged_answer="reject").run(ITEM)
    assert traj.finish_reason == "answered" and len(traj.steps) == 2
    assert traj.steps[0].error == "no tool call and no <answer> tags"
    assert "<answer>" in llm.requests[1]["messages"][-1].content


def test_react_context_limit_mid_run_keeps_steps_and_an_llm_error_propagates(retriever):
    llm = ScriptedLLM([search(), ContextLimitError("over 8192 tokens")])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert traj.finish_reason == "context_limit" and traj.answer is None
    assert len(traj.steps) == 1 and traj.steps[0].hits and traj.metadata["flagged"] == "context_limit"
    assert "8192" in traj.metadata["error"]
    with pytest.raises(LLMError, match="server down"):  # an outage is not a trajectory: the caller's policy
        build_agent("react", ScriptedLLM([search(), LLMError("server down", is_retryable=True)]), retriever).run(ITEM)


def test_react_parallel_calls_only_first_runs(retriever):
    llm = ScriptedLLM([[search("Paris"), search("Berlin")], "<answer>Paris</answer>"])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert retriever.queries == ["Paris"] and "1 extra tool call" in (traj.steps[0].error or "")


# --------------------------------------------------------------------------------- plan_step
def rag(query: str = "capital of France", **extra: object) -> ToolCall:
    return ToolCall(name="RAG_search", arguments={"query": query, **extra})


def final(answer: str) -> ToolCall:
    return ToolCall(name="Final_Answer", arguments={"answer": answer})


def test_plan_step_happy_path(retriever):
    llm = ScriptedLLM(["1. Search the capital of France.", rag(topk=2), final("Paris")])
    traj = build_agent("plan_step", llm, retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert llm.requests[0]["tools"] is None
    assert {t["function"]["name"] for t in llm.requests[1]["tools"]} == {"RAG_search", "Final_Answer"}
    assert traj.metadata["plan"].startswith("1. Search") and traj.steps[0].action is None
    assert len(traj.steps[1].hits) == 2 and traj.steps[2].action.name == "Final_Answer"
    assert llm.requests[2]["messages"][-2].role == "tool"  # then the step instruction
    assert llm.requests[2]["messages"][-1].role == "user"


def test_plan_step_text_final_answer(retriever):
    traj = build_agent("plan_step", ScriptedLLM(["plan", "Final_Answer: Paris"]), retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")


def test_plan_step_turns_without_tool_end_with_parse_error(retriever):
    llm = ScriptedLLM(["plan", rag()], default="I am still thinking.")
    traj = build_agent("plan_step", llm, retriever).run(ITEM)
    assert traj.finish_reason == "parse_error"
    assert len(traj.steps) == 2 + 5 and all(s.observation is None and s.action is None for s in traj.steps[2:])
    # each re-ask is the step prompt alone, right after the reply without a tool call
    for req in llm.requests[3:]:
        assert [m.role for m in req["messages"][-2:]] == ["assistant", "user"]
        assert req["messages"][-1].content == STEP_USER


def test_plan_step_malformed_and_bad_arguments(retriever):
    bad_json = '<tool_call>{"name": "RAG_search", "arguments": {"query": "x"</tool_call>'
    llm = ScriptedLLM(["plan", bad_json, ToolCall(name="RAG_search", arguments={"q": "x"}),
                       ToolCall(name="lookup", arguments={}), final("Paris")])
    traj = build_agent("plan_step", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered"
    assert "not valid JSON" in (traj.steps[1].error or "")
    assert "'query' must be a non-empty string" in (traj.steps[2].error or "")
    assert "unknown tool 'lookup'" in (traj.steps[3].error or "")
    assert retriever.calls == 0


def test_plan_step_no_answer_max_steps_llm_error(retriever):
    traj = build_agent("plan_step", ScriptedLLM(["plan", final("")]), retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("no_answer", None)
    llm = ScriptedLLM(["plan"], default=rag())
    traj = build_agent("plan_step", llm, retriever, max_steps=2).run(ITEM)
    # the run ends right after the 2nd search: no 3rd request is made
    assert traj.finish_reason == "max_steps" and retriever.calls == 2 and len(traj.steps) == 3
    assert llm.calls == 3 and traj.steps[-1].error is None
    traj = build_agent("plan_step", ScriptedLLM(["plan", rag(), ContextLimitError("boom")]), retriever).run(ITEM)
    assert traj.finish_reason == "context_limit" and len(traj.steps) == 2


# ----------------------------------------------------------------------------- reason_ground
QUERY = "Paris is a city. So the next query is <query>capital of France</query>"
EVIDENCE = "Based on the query, the relevant evidence is <evidence>Paris is the capital of France.</evidence>"


def test_reason_ground_happy_path(retriever):
    llm = ScriptedLLM([QUERY, EVIDENCE, "So the answer is <answer>Paris</answer>"])
    traj = build_agent("reason_ground", llm, retriever, top_k=2).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert [s.action.name if s.action else None for s in traj.steps] == ["search", None, None]
    assert len(traj.steps[0].hits) == 2
    grounding = llm.requests[1]["messages"]
    assert grounding[0].content == GROUNDING_SYSTEM and "Doc 1 (Title: Paris)" in grounding[1].content
    assert "So the next query is <query>capital of France</query>" in grounding[1].content  # y<i
    reasoning = llm.requests[2]["messages"]
    assert reasoning[0].content == REASONING_SYSTEM and "<evidence>Paris is the capital" in reasoning[1].content


def test_reason_ground_missing_tags_keep_the_stage(retriever):
    llm = ScriptedLLM(["hmm", QUERY, "no tags here", EVIDENCE, "<answer>Paris</answer>"])
    traj = build_agent("reason_ground", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered"
    assert traj.steps[0].error == "no <query>, <answer> or <evidence> in the output"
    assert traj.steps[2].error == "no <query>, <answer> or <evidence> in the output"
    systems = [r["messages"][0].content for r in llm.requests]
    assert systems == [REASONING_SYSTEM, REASONING_SYSTEM, GROUNDING_SYSTEM, GROUNDING_SYSTEM, REASONING_SYSTEM]


def reason_ground_policy(messages, **_):
    return EVIDENCE if messages[0].content == GROUNDING_SYSTEM else QUERY


def test_reason_ground_forced_answer_and_limits(retriever):
    llm = ScriptedLLM([QUERY, EVIDENCE, "So the answer is <answer>Paris</answer>"])
    traj = build_agent("reason_ground", llm, retriever, max_steps=2).run(ITEM)
    assert traj.finish_reason == "answered" and FORCE_ANSWER in llm.requests[2]["messages"][1].content
    before = retriever.calls
    traj = build_agent("reason_ground", ScriptedLLM(default=reason_ground_policy), retriever, max_steps=4).run(ITEM)
    # 4 rounds of Algorithm 1 + the forced round (which asked another query)
    assert traj.finish_reason == "max_steps" and len(traj.steps) == 5 and retriever.calls - before == 2
    traj = build_agent("reason_ground", ScriptedLLM([QUERY, EVIDENCE, "I am unsure."]), retriever,
                       max_steps=2).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("no_answer", None)


def test_reason_ground_parse_error_and_llm_error(retriever):
    traj = build_agent("reason_ground", ScriptedLLM(default="blah"), retriever).run(ITEM)
    assert traj.finish_reason == "parse_error" and len(traj.steps) == 3
    traj = build_agent("reason_ground", ScriptedLLM([QUERY, ContextLimitError("x")]), retriever).run(ITEM)
    assert traj.finish_reason == "context_limit" and len(traj.steps) == 1 and traj.steps[0].hits


# --------------------------------------------------------------------------------- search_r1
def test_search_r1_happy_path(retriever):
    llm = ScriptedLLM(["<think>I need the capital.</think><search>capital of France",
                       "<think>Doc 1 says Paris.</think><answer>Paris</answer>"])
    traj = build_agent("search_r1", llm, retriever, top_k=2).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert llm.requests[0]["stop"] == ["</search>"]
    assert traj.steps[0].thought.endswith("<search>capital of France</search>")
    info = llm.requests[1]["messages"][-1]
    assert info.role == "assistant" and info.content.startswith("<think>I need the capital.</think>")
    assert info.content.endswith("</search>\n\n<information>Doc 1(Title: Paris) Paris is the capital and largest "
                                 "city of France.\nDoc 2(Title: Berlin) Berlin is the capital of Germany."
                                 "</information>\n\n")
    stream = traj.metadata["stream"]
    assert stream.index("<search>") < stream.index("<information>") < stream.index("<answer>")


def test_search_r1_text_after_search_is_cut(retriever):
    llm = ScriptedLLM(["<search>Berlin</search> and <answer>Rome</answer>", "<answer>Berlin</answer>"])
    traj = build_agent("search_r1", llm, retriever).run(ITEM)
    assert traj.answer == "Berlin" and traj.steps[0].thought == "<search>Berlin</search>"


def test_search_r1_invalid_actions(retriever):
    llm = ScriptedLLM(["I think it is Paris.", "<search> </search>", "<answer>Paris</answer>"])
    traj = build_agent("search_r1", llm, retriever).run(ITEM)
    assert traj.finish_reason == "answered"
    assert traj.steps[0].error == "no <search> or <answer>"
    assert llm.requests[1]["messages"][-1].content == f"I think it is Paris.\n{SEARCH_R1_INVALID}\n"
    assert "non-empty" in (traj.steps[1].error or "") and retriever.calls == 0
    traj = build_agent("search_r1", ScriptedLLM(default="nothing"), retriever).run(ITEM)
    assert traj.finish_reason == "parse_error" and len(traj.steps) == 3


def test_search_r1_no_answer_max_steps_llm_error(retriever):
    traj = build_agent("search_r1", ScriptedLLM(["<answer></answer>"]), retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("no_answer", None)
    traj = build_agent("search_r1", ScriptedLLM(default="<search>Paris</search>"), retriever, max_steps=3).run(ITEM)
    assert traj.finish_reason == "max_steps" and retriever.calls == 3
    traj = build_agent("search_r1", ScriptedLLM(["<search>Paris", ContextLimitError("x")]), retriever).run(ITEM)
    assert traj.finish_reason == "context_limit" and len(traj.steps) == 1
    assert "<information>" in traj.metadata["stream"]


@pytest.mark.parametrize("name", ["react", "plan_step", "reason_ground", "search_r1"])
def test_every_agent_survives_garbage(retriever, name):
    llm = ScriptedLLM(default=Completion(text="\x00{{{<answer", tool_calls=[ToolCall(name="", arguments={})]))
    traj = build_agent(name, llm, retriever, max_steps=4).run(ITEM)
    assert traj.finish_reason in VALID and traj.steps and traj.id == "q1" and traj.agent == name


def test_react_json_text_replies(retriever):
    bare = '{"name": "dense_search", "arguments": {"query": "Berlin"}}'
    truncated = '{ "name": "dense_search","argu'
    llm = ScriptedLLM([bare, truncated, '{"answer": "Berlin"}'])
    traj = build_agent("react", llm, retriever).run(ITEM)
    assert traj.steps[0].hits[0].id == "p2" and traj.steps[0].thought == ""
    assert "not valid JSON" in (traj.steps[1].error or "") and not traj.steps[1].hits
    assert (traj.finish_reason, traj.answer) == ("answered", "Berlin")
    assert "answer_tagged" not in traj.metadata


def test_react_forced_turn_rejects_tool_call_text(retriever):
    llm = ScriptedLLM([search(), '{"name": "dense_search", "arguments": {"query": "Paris"}}'])
    traj = build_agent("react", llm, retriever, max_steps=2).run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("max_steps", None)
    llm = ScriptedLLM([search(), '{"name": "dense_search", "argum'])
    assert build_agent("react", llm, retriever, max_steps=2).run(ITEM).finish_reason == "max_steps"


def test_react_forced_answer_as_json(retriever):
    llm = ScriptedLLM([search(), '{"answer": "Paris"}'])
    traj = build_agent("react", llm, retriever, max_steps=2, forced_answer_format="json").run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    schema = llm.requests[1]["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["answer"] and llm.requests[0]["response_format"] is None


def test_react_forced_json_answer_is_validated_by_its_model(retriever):
    from agentrag.agents.react import ANSWER_FORMAT

    assert ANSWER_FORMAT["json_schema"]["schema"]["properties"]["answer"]["maxLength"] == 100
    llm = ScriptedLLM([search(), '{"answer": "' + "x" * 150 + '"}'])
    traj = build_agent("react", llm, retriever, max_steps=2, forced_answer_format="json").run(ITEM)
    assert (traj.finish_reason, traj.answer) == ("max_steps", None)
    assert "invalid final answer" in (traj.steps[-1].error or "") and "answer" in traj.steps[-1].error
