"""Training = inference: a planner_executor agent trained on EviPath's export replays a 4-hop
training path within its default budgets, request for request.

The path is synthesized with the gold-data fake on MuSiQue 4-hop items, the executor's context
filled from a KB of the file's paragraphs (as ``agentrag kb build`` ingests them). The "trained"
model is a scripted LLM that answers each request with the exported assistant turn of the
conversation whose messages are exactly the request; the retriever returns, for each sub-question,
the KB passages the exported executor record shows, in its order. The real agent then runs with its
default config, and with the CPU budgets ``--llm embedded`` gives it in eval.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from agentrag.agents import build_agent
from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM
from agentrag.agents.planner_executor import FORCE, PlannerExecutorConfig, passage_text
from agentrag.eval.defaults import resolved_eval_config
from agentrag.eval.runner import EvalConfig
from agentrag.kb.ingest import pooled_passages
from agentrag.records import Hit, Message, QAItem
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.schema import ConversationRecord
from agentrag.testing import FakeRetriever, ScriptedLLM
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

FOUR_HOP = "4hop1__709382_146811_31223_91015"


@pytest.fixture(scope="module")
def exported(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The kept conversations of a run over the 4-hop MuSiQue items, and the KB it filled contexts from."""
    src = data_dir / "musique" / "train_100.jsonl"
    records = [json.loads(line) for line in src.read_text().splitlines()]
    four = [r for r in records if len(r.get("question_decomposition") or []) == 4]
    tmp = tmp_path_factory.mktemp("replay")
    data = tmp / "musique_4hop.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in four))
    kb = list(pooled_passages([data]))
    run_evipath(EviPathRunConfig(datasets=[str(data)], concurrency=1), tmp / "run", planner=CleanGoldLLM(four),
                embedder=ContentWordEmbedder(), retriever=FakeRetriever(kb))
    convs = [ConversationRecord.model_validate_json(x) for x in (tmp / "run" / "conversations.jsonl").read_text().splitlines()]
    kept = [c for c in convs if c.kept and c.item_id == FOUR_HOP]
    item = next(r for r in four if r["id"] == FOUR_HOP)
    return {"planner": next(c for c in kept if c.role == "planner"),
            "executors": [c for c in kept if c.role == "executor"], "kb": kb, "item": item,
            "sft": (tmp / "run" / "sft" / "trl_sft.jsonl").read_text()}


class TrainedModel:
    """Answers a request with the exported assistant turn that follows exactly these messages; a
    request no exported conversation starts with is recorded as a mismatch (and answered with
    nothing parseable)."""

    def __init__(self, conversations: list[ConversationRecord]) -> None:
        self.conversations = conversations
        self.requests: list[list[Message]] = []
        self.mismatches: list[list[Message]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[Message], **kwargs: Any) -> str:
        request = [Message(role=m.role, content=m.content) for m in messages]
        with self._lock:
            self.requests.append(request)
            for c in self.conversations:
                turns = [Message(role=m.role, content=m.content) for m in c.messages]
                if turns[:len(request)] == request and len(turns) > len(request) \
                        and turns[len(request)].role == "assistant":
                    return turns[len(request)].content or ""
            self.mismatches.append(request)
            return "no exported turn follows this request"


class TrainingRetriever:
    """The KB's passages each exported executor record shows for its sub-question, in its order
    (the evidence lines must be KB passages as the agent renders them)."""

    def __init__(self, kb: list[Any], executors: list[ConversationRecord], max_chars: int | None) -> None:
        by_shown = {passage_text(Hit(id=p.id, title=p.title, text=p.text, score=0.0), max_chars): p for p in kb}
        by_shown = {" ".join(k.split()): p for k, p in by_shown.items()}
        self.shown: dict[str, list[Any]] = {}
        for c in executors:
            user = c.messages[1].content or ""
            question = user.split("\n", 1)[0].removeprefix("Question: ")
            lines = re.findall(r"^\[\d+\] (.*)$", user, flags=re.M)
            self.shown[question] = [by_shown[line] for line in lines]  # KeyError: not the KB's passage unit

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        return [[Hit(id=p.id, title=p.title, text=p.text, score=1.0 - i / 100) for i, p in
                 enumerate(self.shown.get(q, []))][:k] for q in queries]


def _replay(exported: dict[str, Any], agent_config: dict[str, Any]) -> tuple[Any, TrainedModel]:
    model = TrainedModel([exported["planner"], *exported["executors"]])
    retriever = TrainingRetriever(exported["kb"], exported["executors"], agent_config.get("max_passage_chars"))
    agent = build_agent("planner_executor", ScriptedLLM(default=model), retriever, **agent_config)
    item = exported["item"]
    traj = agent.run(QAItem(id=item["id"], question=item["question"], golden_answers=[item["answer"]]))
    return traj, model


def _conversation_of(request: list[Message], exported: dict[str, Any]) -> ConversationRecord:
    return next(c for c in [exported["planner"], *exported["executors"]]
                if [Message(role=m.role, content=m.content) for m in c.messages[:len(request)]] == request)


@pytest.mark.parametrize("budgets", ["default", "embedded"])
def test_a_trained_agent_replays_a_4_hop_training_path_within_its_default_budget(exported, budgets):
    planner = exported["planner"]
    searches = [m.content.count('Search("') for m in planner.messages if m.role == "assistant"]
    assert sum(searches) == 4 and searches[-1] == 0 and len(searches) == 5  # 4 searches, then the answer turn
    assert len(exported["executors"]) == 4
    if budgets == "default":
        agent_config = PlannerExecutorConfig().model_dump()
    else:  # what `agentrag eval --llm embedded --agent planner_executor` runs with
        agent_config = resolved_eval_config(EvalConfig(llm="embedded", agent="planner_executor")).agent_config
    traj, model = _replay(exported, agent_config)
    assert model.mismatches == [], model.mismatches[0]
    assert traj.finish_reason == "answered" and traj.answer == exported["item"]["answer"]
    # every request is an exported record's messages turn for turn: system prompt, user template, evidence
    planner_requests = [r for r in model.requests if r[0].content == PLANNER_SYSTEM]
    executor_requests = [r for r in model.requests if r[0].content == EXECUTOR_SYSTEM]
    assert len(planner_requests) == 5 and len(executor_requests) == 4 == len(model.requests) - 5
    assert [len(r) for r in planner_requests] == [2, 4, 6, 8, 10]
    assert planner_requests[-1] == [Message(role=m.role, content=m.content) for m in planner.messages[:-1]]
    for r in executor_requests:
        c = _conversation_of(r, exported)
        assert c.role == "executor" and len(r) == 2 and r[1].content.count("\n[") == agent_config["top_k"]
    assert not any(FORCE in (m.content or "") for r in model.requests for m in r)  # no forced-answer turn
    # and these conversations are what the SFT export holds
    sft = [json.loads(line)["messages"] for line in exported["sft"].splitlines()]
    for c in [planner, *exported["executors"]]:
        assert [{"role": m.role, "content": m.content} for m in c.messages] in \
            [[{"role": m["role"], "content": m["content"]} for m in s] for s in sft]


def test_the_synthesizer_defaults_are_the_agents_budgets():
    """One home: a kept path fits the agent's max_steps and max_searches (its last turn is forced),
    and the executor's context is the agent's top_k and passage cut."""
    agent, synth = PlannerExecutorConfig(), EviPathConfig()
    assert synth.planner.max_iterations == agent.max_steps - 1 and synth.planner.max_searches == agent.max_searches - 1
    assert synth.executor.context == "agent" and synth.executor.top_k == agent.top_k
    assert synth.executor.max_passage_chars == agent.max_passage_chars
    emb = resolved_eval_config(EvalConfig(llm="embedded", agent="planner_executor")).agent_config
    assert (emb["max_steps"], emb["top_k"], emb["max_searches"]) == (agent.max_steps, agent.top_k, agent.max_searches)
    react = resolved_eval_config(EvalConfig(llm="embedded", agent="react")).agent_config
    assert (react["max_steps"], react["top_k"]) == (4, 3)  # the other agents keep the CPU budgets


def test_the_old_embedded_budget_could_not_replay_it(exported):
    """max_steps 4 (the CPU budget other agents get) forces an answer after 3 searches: a turn no
    training record contains, and the path's answer is never reached."""
    traj, model = _replay(exported, PlannerExecutorConfig(max_steps=4).model_dump())
    assert any(FORCE in (m.content or "") for r in model.requests for m in r) and model.mismatches
    assert traj.answer != exported["item"]["answer"]


@pytest.mark.parametrize("name", ["hotpotqa/train_distractor_100.jsonl", "2wikimultihopqa/train_600.jsonl",
                                  "musique/train_100.jsonl"])
def test_the_executor_context_is_in_the_kbs_passage_unit(data_dir, name):
    """HotpotQA and 2Wiki facts are sentences; the executor is shown their paragraphs, each exactly
    a passage `agentrag kb build` makes of the file (MuSiQue: its paragraphs); the gold paragraph is in."""
    from agentrag.synth.evipath.answering import shuffled_order
    from agentrag.synth.evipath.context import agent_context, passage_units
    from agentrag.synth.evipath.inputs import read_items

    items = read_items(data_dir / name, limit=20)
    kb = {(" ".join(p.title.split()), " ".join(p.text.split())) for p in pooled_passages([data_dir / name])}
    for item in items:
        units = passage_units(item)
        assert all((u.title, u.text) in kb for u in units)
        assert sorted(f for u in units for f in u.facts) == list(range(len(item.facts)))
        gold = item.gold[:1]
        evidence, positions, problem = agent_context(item, gold, item.question, lambda n, s: shuffled_order(n, 0, s),
                                                     top_k=5, max_chars=None, retriever=None)
        assert problem is None and len(evidence) == min(5, len(units)) and len(positions) == 1
        assert item.facts[gold[0]].text.split()[-1] in evidence[positions[0]]
    long = next(i for i in items if len(i.facts[i.gold[0]].text) > 60)
    cut, _, problem = agent_context(long, long.gold[:1], "q?", lambda n, s: list(range(n)), top_k=5, max_chars=50,
                                    retriever=None)
    assert all(len(e.split(": ", 1)[-1]) <= 50 for e in cut)
    assert problem is not None and problem.startswith("gold_cut")  # the agent would not see the gold sentence
