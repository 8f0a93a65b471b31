"""Reasoning models through a stub OpenAI-compatible server (issue 25, item 2): ``reasoning_content``
beside the content, ``<think>`` before a tool call, ``<think>`` before a forced JSON answer, and an
untagged-then-tagged answer after a think block. The reasoning lands in ``Step.reasoning``, never in
the thought or the answer, and the SFT export drops it unless asked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrag.agents import build_agent
from agentrag.export.sft import to_sharegpt, to_trl_records
from agentrag.llm import OpenAIBackend
from agentrag.llm.parsing import parse_json_output, parse_text_tool_calls, split_think
from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever, StubOpenAIServer

PASSAGES = [Passage(id="p1", title="Paris", text="Paris is the capital and largest city of France."),
            Passage(id="p2", title="Berlin", text="Berlin is the capital of Germany.")]
ITEM = QAItem(id="q1", question="What is the capital of France?", golden_answers=["Paris"])
THINK = "The user asks about France {\"not\": \"json\"}; I should search."


def _script(replies: list[dict[str, Any]]):
    it = iter(replies)
    return lambda body: next(it)


def _run(replies: list[dict[str, Any]], **cfg: Any):
    with StubOpenAIServer(reply=_script(replies)) as srv:
        llm = OpenAIBackend("stub", base_url=srv.base_url, api_key="k", max_retries=0)
        return build_agent("react", llm, FakeRetriever(PASSAGES), **cfg).run(ITEM)


def _call(query: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "dense_search",
                                                         "arguments": json.dumps({"query": query})}}


def test_reasoning_content_field_goes_to_step_reasoning():
    traj = _run([
        {"role": "assistant", "content": None, "reasoning_content": THINK, "tool_calls": [_call("capital France")]},
        {"role": "assistant", "content": "It is Paris. <answer>Paris</answer>", "reasoning_content": "Found it."}])
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert traj.steps[0].reasoning == THINK and traj.steps[0].action is not None
    assert traj.steps[1].reasoning == "Found it." and "Found it" not in traj.steps[1].thought


def test_think_before_a_text_tool_call_and_before_the_answer():
    traj = _run([
        {"role": "assistant", "content": f"<think>{THINK}</think>\n<tool_call>"
                                         '{"name": "dense_search", "arguments": {"query": "capital France"}}'
                                         "</tool_call>"},
        {"role": "assistant", "content": "<think>Passage p1 says Paris.</think>Paris is the capital. "
                                         "<answer>Paris</answer>"}])
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    s0, s1 = traj.steps
    assert s0.action is not None and s0.action.arguments == {"query": "capital France"}
    assert s0.reasoning == THINK and "think" not in s0.thought and "should search" not in s0.thought
    assert s1.reasoning == "Passage p1 says Paris." and s1.thought == "Paris is the capital. <answer>Paris</answer>"
    assert "<think>" in (s0.raw or "")  # the raw reply is kept whole


def test_think_before_a_forced_json_answer():
    traj = _run([{"role": "assistant", "content": None, "tool_calls": [_call("capital France")]},
                 {"role": "assistant", "content": f'<think>{THINK} {{"answer": "wrong"}}</think>\n{{"answer": "Paris"}}'}],
                max_steps=2, force_answer=True, forced_answer_format="json")
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert "wrong" in (traj.steps[-1].reasoning or "") and "think" not in traj.steps[-1].thought


def test_think_only_reply_is_an_empty_reply_then_the_answer_has_no_think_text():
    traj = _run([{"role": "assistant", "content": "<think>Maybe Lyon? Paris?</think>"},
                 {"role": "assistant", "content": "<think>Surely Paris.</think><answer>Paris</answer>"}])
    assert (traj.finish_reason, traj.answer) == ("answered", "Paris")
    assert traj.steps[0].error == "empty reply" and traj.steps[0].reasoning == "Maybe Lyon? Paris?"
    assert "Lyon" not in traj.steps[0].thought and traj.steps[1].reasoning == "Surely Paris."


def test_untagged_final_message_after_think_is_the_answer_without_it():
    from agentrag.agents import messages_to_trajectory

    traj = messages_to_trajectory([{"role": "user", "content": "Capital of France?"},
                                   {"role": "assistant", "content": "<think>It is Paris, not Lyon.</think>\nParis"}])
    assert (traj.answer, traj.finish_reason) == ("Paris", "answered")
    assert traj.steps[0].reasoning == "It is Paris, not Lyon." and traj.steps[0].thought == "Paris"


@pytest.mark.parametrize("text,rest,reasoning", [
    ("<think>a</think>b", "b", "a"),
    ("a</think>b", "b", "a"),                      # template opened <think> in the prompt
    ("<think>a</think>b<think>c</think>d", "bd", "a\n\nc"),
    ("x <think>unfinished", "x", "unfinished"),     # budget ran out while thinking
    ("no reasoning", "no reasoning", None),
])
def test_split_think_forms(text, rest, reasoning):
    assert split_think(text) == (rest, reasoning)


def test_parsers_ignore_think_blocks():
    assert parse_json_output('<think>{"answer": "no"}</think> {"answer": "yes"}') == {"answer": "yes"}
    tools = [{"type": "function", "function": {"name": "dense_search", "parameters": {}}}]
    rest, calls = parse_text_tool_calls('<think>hmm</think>{"name": "dense_search", "arguments": {"query": "q"}}',
                                        tools)
    assert rest == "<think>hmm</think>" and calls[0].arguments == {"query": "q"}


def test_sft_export_drops_reasoning_by_default_and_keeps_it_on_request():
    traj = _run([
        {"role": "assistant", "content": "Let me look.", "reasoning_content": THINK,
         "tool_calls": [_call("capital France")]},
        {"role": "assistant", "content": "<think>p1 says Paris.</think>It is Paris. <answer>Paris</answer>"}])
    plain = json.dumps(to_trl_records([traj])[0])
    assert "should search" not in plain and "p1 says" not in plain and "Let me look." in plain
    kept = to_trl_records([traj], reasoning=True)[0]["messages"]
    assistant = [m["content"] for m in kept if m["role"] == "assistant"]
    assert assistant[0] == f"<think>\n{THINK}\n</think>\n\nLet me look."
    assert assistant[-1].startswith("<think>\np1 says Paris.\n</think>\n\nIt is Paris.")
    share = to_sharegpt([traj], reasoning=True)[0]["conversations"]
    assert "p1 says Paris." in share[-1]["value"]
