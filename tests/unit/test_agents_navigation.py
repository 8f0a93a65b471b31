"""Navigation policies (RAGShaper Eq. 8) and the retrieval tool."""

from __future__ import annotations

import random

import pytest

from agentrag.agents import (
    ConstrainedNavigation,
    PlainNavigation,
    RetrievalTool,
    build_agent,
    format_documents,
    is_distractor,
    search_tool_schema,
)
from agentrag.agents.tools import parse_top_k
from agentrag.errors import RetrievalError, UserError
from agentrag.records import Hit, Passage, QAItem, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

MAIN = [Passage(id=f"m{i}", title=f"Main {i}", text=f"river city fact number {i}") for i in range(8)]
DISTRACTORS = [Passage(id=f"d{i}", title=f"Main {i}", text=f"river city claim number {i}",
                       metadata={"distractor_type": "doppelganger"}) for i in range(4)]


def policy(p_e: float = 0.5, seed: int = 0) -> ConstrainedNavigation:
    return ConstrainedNavigation(FakeRetriever(MAIN, kb="wiki"), FakeRetriever(DISTRACTORS, kb="distractors"),
                                 p_e=p_e, rng=random.Random(seed))


def n_distractors(hits: list[Hit]) -> int:
    return sum(is_distractor(h) for h in hits)


def test_step_one_always_has_exactly_two_distractors():
    for seed in range(50):
        hits = policy(p_e=0.0, seed=seed).search("river city", 5, 1, [])
        assert len(hits) == 5 and n_distractors(hits) == 2
        assert {h.kb for h in hits if is_distractor(h)} == {"distractors"}
        assert all(h.metadata["distractor_type"] == "doppelganger" for h in hits if is_distractor(h))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def simulate(p_e: float, steps: int = 10_000, per_trajectory: int = 10) -> tuple[int, int, int]:
    """Runs ``steps`` retrieval steps in trajectories of ``per_trajectory`` through RetrievalTool;
    returns (K~ steps right after a K~ step, eligible steps, eligible steps that read K~)."""
    nav = policy(p_e=p_e, seed=1234)
    after_distractor = eligible = chosen = 0
    for _ in range(steps // per_trajectory):
        tool = RetrievalTool(nav, default_k=4)
        previous_had_distractor = False
        for t in range(1, per_trajectory + 1):
            result = tool({"query": "river city fact"})
            has = n_distractors(result.hits) > 0
            if t == 1:
                assert n_distractors(result.hits) == 2 and len(result.hits) == 4
            elif previous_had_distractor:
                after_distractor += has
            else:
                eligible += 1
                chosen += has
                assert n_distractors(result.hits) in (0, 2)
            previous_had_distractor = has
    return after_distractor, eligible, chosen


@pytest.mark.parametrize("p_e", [0.5, 0.3])
def test_distractor_rate_is_p_e_and_never_twice_in_a_row(p_e):
    after_distractor, eligible, chosen = simulate(p_e)
    assert after_distractor == 0
    assert eligible > 3000
    assert abs(chosen / eligible - p_e) <= 0.02


def test_plain_navigation_applies_threshold_and_k():
    nav = PlainNavigation(FakeRetriever(MAIN), threshold=0.2)
    hits = nav.search("river city fact number 3", 5, 1, [])
    assert hits and all(h.score > 0.2 for h in hits) and len(hits) <= 5
    assert PlainNavigation(FakeRetriever(MAIN)).search("river", 3, 7, []) != []


def test_bad_policy_parameters():
    with pytest.raises(UserError, match="p_e"):
        ConstrainedNavigation(FakeRetriever(MAIN), FakeRetriever(DISTRACTORS), p_e=1.5)
    with pytest.raises(UserError, match="k_distractor"):
        ConstrainedNavigation(FakeRetriever(MAIN), FakeRetriever(DISTRACTORS), k_distractor=0)


def test_observation_hides_the_source():
    hits = policy().search("river city", 5, 1, [])
    text = format_documents(hits)
    assert "distractor" not in text.lower() and "wiki" not in text
    lines = text.splitlines()
    assert len(lines) == 5 and all(line.startswith(f"Doc {i} (Title: Main ") for i, line in enumerate(lines, 1))
    assert format_documents([]) == "No documents found."


def test_agent_over_constrained_navigation_records_origin():
    llm = ScriptedLLM([ToolCall(name="dense_search", arguments={"query": "river city"}),
                       ToolCall(name="dense_search", arguments={"query": "river city"}), "<answer>x</answer>"])
    traj = build_agent("react", llm, policy(p_e=1.0), top_k=5).run(
        QAItem(id="q", question="Which river city?", golden_answers=["x"]))
    first, second = traj.steps[0].hits, traj.steps[1].hits
    assert n_distractors(first) == 2 and n_distractors(second) == 0  # suppressed right after K~
    assert "distractors" not in (traj.steps[0].observation or "")


def test_retrieval_tool_arguments_and_failures():
    tool = RetrievalTool(PlainNavigation(FakeRetriever(MAIN)), default_k=2, max_k=3)
    assert len(tool({"query": "river"}).hits) == 2
    assert len(tool({"query": "river", "top_k": "10"}).hits) == 3
    assert tool({"query": ""}).error and tool.step == 2

    class Broken:
        def search(self, queries, k, threshold=None):
            raise RetrievalError("connection refused")

    result = RetrievalTool(PlainNavigation(Broken()))({"query": "x"})
    assert result.error and "connection refused" in result.observation and result.hits == []
    assert parse_top_k(None, 5, 20) == 5 and parse_top_k(3.0, 5, 20) == 3
    for bad in (0, -1, True, "x", 2.5):
        with pytest.raises(ValueError):
            parse_top_k(bad, 5, 20)


def test_search_tool_schema_shape():
    fn = search_tool_schema()["function"]
    assert fn["name"] == "dense_search" and fn["parameters"]["required"] == ["query"]
    assert set(fn["parameters"]["properties"]) == {"query", "top_k"}


def test_small_k_never_exceeds_k():
    hits = policy().search("river city", 1, 1, [])
    assert len(hits) == 1 and n_distractors(hits) == 1
    assert len(policy().search("river city", 2, 1, [])) == 2
