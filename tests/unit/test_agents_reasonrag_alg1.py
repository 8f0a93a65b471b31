"""reason_ground against ReasonRAG Algorithm 1 (issue 9 item 5), on ScriptedLLM trajectories."""

from __future__ import annotations

import pytest

from agentrag.agents import build_agent
from agentrag.agents.prompts import FORCE_ANSWER, GROUNDING_SYSTEM, REASONING_SYSTEM
from agentrag.agents.reason_ground import GroundingState, detect
from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id="p1", title="Paris", text="Paris is the capital of France."),
            Passage(id="p2", title="Rome", text="Rome was founded by Romulus.")]
ITEM = QAItem(id="q", question="Who founded the capital of Italy?", golden_answers=["Romulus"])
Q1 = "I need the capital first. So the next query is <query>capital of Italy</query>"
EV = "Based on the query, the relevant evidence is <evidence>Rome is the capital.</evidence>"


@pytest.fixture
def retriever() -> FakeRetriever:
    return FakeRetriever(PASSAGES)


def test_grounding_sees_the_history_y_before_i(retriever):
    llm = ScriptedLLM(["Start. So the next query is <query>Italy capital</query>", EV,
                       "So the next query is <query>Rome founder</query>", EV, "So the answer is <answer>Romulus</answer>"])
    traj = build_agent("reason_ground", llm, retriever).run(ITEM)
    assert traj.answer == "Romulus"
    second_grounding = llm.requests[3]["messages"]
    assert second_grounding[0].content == GROUNDING_SYSTEM
    user = second_grounding[1].content
    # x, y<i (every earlier output, in order) and the docs of the latest query
    assert user.index("Italy capital") < user.index("Rome is the capital.") < user.index("Rome founder")
    assert "Doc 1 (Title: Rome)" in user and "Latest query: Rome founder" in user


@pytest.mark.parametrize("text, kind, content", [
    ("So the next query is <query>a</query> and <answer>b</answer>", "query", "a"),
    ("<evidence>e</evidence> So the answer is <answer>b</answer>", "answer", "b"),
    ("<evidence>e</evidence>", "evidence", "e"),
    ("<query>first</query> then <query>second</query>", "query", "first"),
    ("nothing", "none", None),
])
def test_outputs_are_checked_in_algorithm_order(text, kind, content):
    got_kind, got, _ = detect(text)
    assert (got_kind, got) == (kind, content)


def test_first_query_is_used_and_the_output_cut_after_it(retriever):
    llm = ScriptedLLM(["<query>Rome founder</query> <query>Paris</query> more text", EV,
                       "So the answer is <answer>Romulus</answer>"])
    traj = build_agent("reason_ground", llm, retriever).run(ITEM)
    assert retriever.queries == ["Rome founder"]
    assert traj.steps[0].thought == "<query>Rome founder</query>"
    assert llm.requests[0]["stop"] == ["</query>"]
    # an unclosed query (generation stopped at </query>) is closed
    assert detect("So the next query is <query>abc")[2].endswith("<query>abc</query>")


def test_a_query_in_the_grounding_stage_is_acted_on(retriever):
    llm = ScriptedLLM([Q1, "<evidence>None</evidence> So the next query is <query>Rome founder</query>", EV,
                       "<answer>Romulus</answer>"])
    traj = build_agent("reason_ground", llm, retriever).run(ITEM)
    assert retriever.queries == ["capital of Italy", "Rome founder"] and traj.answer == "Romulus"
    assert [r["messages"][0].content for r in llm.requests] == [REASONING_SYSTEM, GROUNDING_SYSTEM,
                                                                GROUNDING_SYSTEM, REASONING_SYSTEM]


def test_an_answer_in_the_grounding_stage_ends_the_run(retriever):
    llm = ScriptedLLM([Q1, "The founder is known: <answer>Romulus</answer>"])
    traj = build_agent("reason_ground", llm, retriever).run(ITEM)
    assert (traj.finish_reason, traj.answer, llm.calls) == ("answered", "Romulus", 2)


def test_forced_round_runs_a_pending_grounding_step_first(retriever):
    llm = ScriptedLLM([Q1, EV, "So the next query is <query>Rome founder</query>",
                       "<evidence>Rome was founded by Romulus.</evidence>", "So the answer is <answer>Romulus</answer>"])
    traj = build_agent("reason_ground", llm, retriever, max_steps=3).run(ITEM)
    systems = [r["messages"][0].content for r in llm.requests]
    assert systems == [REASONING_SYSTEM, GROUNDING_SYSTEM, REASONING_SYSTEM, GROUNDING_SYSTEM, REASONING_SYSTEM]
    assert FORCE_ANSWER in llm.requests[4]["messages"][1].content
    assert "Rome was founded by Romulus." in llm.requests[4]["messages"][1].content
    assert traj.answer == "Romulus"


def test_without_forced_answer_the_algorithm_returns_unanswered(retriever):
    llm = ScriptedLLM([Q1, EV, "still thinking"])
    traj = build_agent("reason_ground", llm, retriever, max_steps=3, forced_answer=False).run(ITEM)
    assert (traj.finish_reason, traj.answer, llm.calls) == ("max_steps", None, 3)


def test_state_round_usable_outside_the_loop(retriever):
    agent = build_agent("reason_ground", ScriptedLLM([Q1, EV]), retriever)
    from agentrag.records import Trajectory

    traj = Trajectory(id="q", question=ITEM.question)
    tool = agent.new_tool("search", traj=traj, neutralize=True)
    state = GroundingState(ITEM.question)
    assert agent.round(state, traj, tool) is False and state.stage == "grounding"
    assert agent.round(state, traj, tool) is False and state.stage == "reasoning"
    assert state.y == [Q1, EV] and traj.metadata["topk_per_step"] == [3]
