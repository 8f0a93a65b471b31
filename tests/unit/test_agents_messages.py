"""Trajectory <-> chat messages, build_agent and run_many."""

from __future__ import annotations

import threading
import time

import pytest

from agentrag.agents import (
    AGENTS,
    PlainNavigation,
    ReactConfig,
    build_agent,
    messages_to_trajectory,
    react_system_prompt,
    run_many,
    search_tool_schema,
    trajectory_to_messages,
)
from agentrag.errors import UserError
from agentrag.records import Passage, QAItem, ToolCall, Trajectory
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id="p1", title="Paris", text="Paris is the capital of France.")]
ITEM = QAItem(id="q1", question="What is the capital of France?", golden_answers=["Paris"])


def react_trajectory() -> Trajectory:
    llm = ScriptedLLM(["not json <tool_call>{bad</tool_call>",
                       ToolCall(name="dense_search", arguments={"query": "capital of France", "top_k": 1}),
                       "Paris it is. <answer>Paris</answer>"])
    return build_agent("react", llm, FakeRetriever(PASSAGES)).run(ITEM)


def visible(traj: Trajectory) -> list[tuple]:
    return [(s.thought, s.action.name if s.action else None, s.action.arguments if s.action else None,
             s.observation) for s in traj.steps]


def test_round_trip_react():
    traj = react_trajectory()
    msgs = trajectory_to_messages(traj, react_system_prompt(), [search_tool_schema()])
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert msgs == traj.messages  # the agent's own conversation is the canonical view
    back = messages_to_trajectory(msgs, id=traj.id)
    assert visible(back) == visible(traj)
    assert (back.question, back.answer, back.finish_reason) == (traj.question, "Paris", "answered")


def test_round_trip_through_openai_dicts():
    traj = react_trajectory()
    dicts = [m.to_openai() for m in trajectory_to_messages(traj, "sys")]
    assert isinstance(dicts[4]["tool_calls"][0]["function"]["arguments"], str)
    back = messages_to_trajectory(dicts)
    assert visible(back) == visible(traj) and back.answer == "Paris"


def test_round_trip_plan_step_final_answer_tool():
    llm = ScriptedLLM(["plan", ToolCall(name="RAG_search", arguments={"query": "France"}),
                       ToolCall(name="Final_Answer", arguments={"answer": "Paris"})])
    traj = build_agent("plan_step", llm, FakeRetriever(PASSAGES)).run(ITEM)
    back = messages_to_trajectory(trajectory_to_messages(traj))
    assert visible(back) == visible(traj) and back.answer == "Paris"


def test_parallel_tool_calls_are_matched_by_id():
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "t", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "s", "arguments": '{"query": "x"}'}},
            {"id": "b", "type": "function", "function": {"name": "s", "arguments": '{"query": "y"}'}}]},
        {"role": "tool", "tool_call_id": "b", "content": "obs y"},
        {"role": "tool", "tool_call_id": "a", "content": "obs x"},
        {"role": "assistant", "content": "<answer>z</answer>"},
    ]
    traj = messages_to_trajectory(msgs)
    assert [(s.action.arguments["query"], s.observation) for s in traj.steps[:2]] == [("x", "obs x"), ("y", "obs y")]
    with pytest.raises(UserError, match="not valid JSON"):
        messages_to_trajectory([msgs[0], {"role": "assistant", "tool_calls": [
            {"id": "a", "function": {"name": "s", "arguments": "{oops"}}]}])
    with pytest.raises(UserError, match="no user message"):
        messages_to_trajectory([{"role": "system", "content": "s"}])


def test_build_agent_validation():
    llm, retr = ScriptedLLM(), FakeRetriever(PASSAGES)
    assert set(AGENTS) == {"react", "plan_step", "reason_ground", "search_r1", "planner_executor",
                           "naive", "standard_rag", "ircot", "iter_retgen"}
    with pytest.raises(UserError, match="unknown agent 'reactt'"):
        build_agent("reactt", llm, retr)
    with pytest.raises(UserError, match="max_step"):
        build_agent("react", llm, retr, max_step=3)
    with pytest.raises(UserError, match="ReactConfig"):
        build_agent("react", llm, retr, config=AGENTS["search_r1"].config_class())
    agent = build_agent("react", llm, retr, config=ReactConfig(max_steps=2), top_k=7, threshold=0.1)
    assert (agent.config.max_steps, agent.config.top_k) == (2, 7)
    assert isinstance(agent.navigation, PlainNavigation) and agent.navigation.threshold == 0.1
    nav = PlainNavigation(retr)
    assert build_agent("search_r1", llm, nav).navigation is nav
    with pytest.raises(UserError, match="neither"):
        build_agent("react", llm, object())  # type: ignore[arg-type]


class SlowAgent:
    name = "slow"

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def run(self, item: QAItem) -> Trajectory:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02 if item.id != "0" else 0.5)
        with self.lock:
            self.active -= 1
        if item.question == "boom":
            raise RuntimeError("infrastructure failure")
        return Trajectory(id=item.id, question=item.question)


def test_run_many_order_callbacks_concurrency():
    items = [QAItem(id=str(i), question=f"q{i}", golden_answers=["a"]) for i in range(12)]
    agent, seen = SlowAgent(), []
    out = run_many(agent, items, concurrency=4, on_result=lambda it, tr: seen.append(tr.id))
    assert [t.id for t in out] == [str(i) for i in range(12)]
    assert sorted(seen, key=int) == [str(i) for i in range(12)] and seen[-1] == "0"  # completion order
    assert agent.peak == 4
    with pytest.raises(RuntimeError, match="infrastructure"):
        run_many(SlowAgent(), [*items[:3], QAItem(id="x", question="boom", golden_answers=[])], concurrency=2)
    with pytest.raises(UserError):
        run_many(agent, items, concurrency=0)


def test_run_many_with_real_agent_is_thread_safe():
    llm = ScriptedLLM(default=lambda messages, **_: (
        "<answer>Paris</answer>" if messages[-1].role == "tool"
        else ToolCall(name="dense_search", arguments={"query": messages[1].content})))
    agent = build_agent("react", llm, FakeRetriever(PASSAGES))
    items = [QAItem(id=str(i), question=f"capital {i}", golden_answers=["Paris"]) for i in range(20)]
    out = run_many(agent, items, concurrency=8)
    assert all(t.answer == "Paris" and len(t.steps) == 2 for t in out) and llm.calls == 40
    assert [t.steps[0].action.arguments["query"] for t in out] == [f"capital {i}" for i in range(20)]
