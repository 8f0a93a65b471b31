"""Every agent protocol end to end on the real embedded model over 5 shared HotpotQA questions."""

from __future__ import annotations

import json
import os

import pytest

from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever
from extras_check import require_module

pytestmark = [pytest.mark.slow, pytest.mark.integration]

require_module("llama_cpp", "llm", import_it=False)  # no import: the model must start OpenMP itself

N = 5
FINISH = {"answered", "max_steps", "no_answer", "parse_error", "llm_error", "context_limit"}


@pytest.fixture(scope="module")
def hotpot(data_dir):
    """The first 5 HotpotQA dev questions and a retriever over their 50 real context paragraphs
    (word-overlap retrieval keeps this test about the agents; the KB has its own tests)."""
    lines = (data_dir / "hotpotqa" / "dev_distractor_200.jsonl").read_text(encoding="utf-8").splitlines()[:N]
    rows = [json.loads(line) for line in lines]
    passages = {title: Passage(id=title, title=title, text="".join(sents))
                for r in rows for title, sents in r["context"]}
    items = [QAItem(id=r["_id"], question=r["question"], golden_answers=[r["answer"]]) for r in rows]
    return items, FakeRetriever(list(passages.values()), kb="hotpot")


@pytest.fixture(scope="module")
def llm():
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from agentrag.llm import resolve_llm

    return resolve_llm("embedded")


# small budgets: the point is well-formed trajectories on a real model, in well under 2 minutes
SETTINGS = {
    "react": {"max_steps": 2, "max_tokens": 32, "top_k": 1, "max_top_k": 2},
    # RAG_search(query, topk) with both arguments required: 32 tokens cut most calls' JSON short
    "plan_step": {"max_steps": 1, "max_turns_without_tool": 1, "max_tokens": 64, "top_k": 1, "max_top_k": 2},
    "reason_ground": {"max_steps": 2, "max_tokens": 32, "top_k": 1},
    "search_r1": {"max_steps": 1, "max_tokens": 32, "top_k": 1},
}
# protocols whose tool calls the embedded backend constrains (so the model must search sometimes)
CONSTRAINED = {"react", "plan_step"}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_agent_end_to_end_on_embedded_model(name, hotpot, llm):
    from agentrag.agents import build_agent, messages_to_trajectory, run_many, trajectory_to_messages

    items, retriever = hotpot
    agent = build_agent(name, llm, retriever, **SETTINGS[name])
    trajs = run_many(agent, items, concurrency=1)
    assert [t.id for t in trajs] == [it.id for it in items]
    passage_ids = {p.id for p in retriever.passages}
    for traj in trajs:
        assert traj.finish_reason in FINISH and traj.finish_reason != "llm_error", traj.metadata
        assert traj.steps and traj.agent == name and traj.usage.calls == len(traj.steps)
        assert traj.usage.prompt_tokens > 0 and traj.elapsed > 0
        assert (traj.answer is not None) == (traj.finish_reason == "answered")
        for step in traj.steps:
            assert step.latency > 0
            for hit in step.hits:
                assert hit.id in passage_ids and hit.kb == "hotpot"
            if step.hits:  # a topk above the agent's limit is said in a note before the documents
                obs = step.observation or ""
                assert obs.startswith("Doc 1 (Title: ") or (
                    obs.startswith("Note: topk=") and "\nDoc 1 (Title: " in obs), obs[:200]
        back = messages_to_trajectory(trajectory_to_messages(traj))
        assert [s.action.name if s.action else None for s in back.steps] == \
               [s.action.name if s.action else None for s in traj.steps]
    if name in CONSTRAINED:
        searched = sum(1 for t in trajs for s in t.steps if s.hits)
        assert searched >= 1, f"{name}: the model never retrieved anything in {N} questions"
