"""ReasonRAG MCTS end to end on fakes: correct-branch preference, forced-answer leaves, judge
values, kill-and-resume equality with no LLM call paid twice, outages left unfinished."""

from __future__ import annotations

import json

import pytest

from agentrag.agents.prompts import FORCE_ANSWER, GROUNDING_SYSTEM
from agentrag.agents.reason_ground import untagged_answer
from agentrag.errors import LLMError
from agentrag.eval.metrics import f1
from agentrag.llm.cache import CachedLLM
from agentrag.records import Message, Passage, QAItem
from agentrag.runs import RunDir
from agentrag.synth.common import derive_seed
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.synth.reasonrag.pipeline import RunFiles
from agentrag.synth.reasonrag.values import PROCESS_JUDGE_SYSTEM, ProcessJudgement
from agentrag.testing import FakeRetriever, ScriptedLLM

QUESTION = QAItem(id="q1", question="Who directed Film Alpha?", golden_answers=["John Smith"])
GOOD_QUERY, BAD_QUERY = "Film Alpha director", "Beta river length"


def retriever() -> FakeRetriever:
    return FakeRetriever([Passage(id="p1", title="Film Alpha", text="Film Alpha director was John Smith."),
                          Passage(id="p2", title="Beta river", text="The Beta river length is 40 km.")])


def policy(messages: list[Message], **kw: object) -> str:
    """Correct only along the branch whose first query is the good one (seed parity picks it)."""
    seed = int(kw.get("seed") or 0)
    tag = f"[s{seed % 9973}]"
    system, user = messages[0].content or "", messages[-1].content or ""
    if system == PROCESS_JUDGE_SYSTEM:
        good = "John Smith" in user.split("so far:", 1)[1]
        return json.dumps({"assessment": "Good steps." if good else "Wrong.", "score": 0.9 if good else 0.1})
    if system == GROUNDING_SYSTEM:
        ev = "Film Alpha director was John Smith." if "John Smith" in user else "None"
        return f"{tag} Based on the query, the relevant evidence is <evidence>{ev}</evidence>"
    history = user.split("\n\n", 1)[1] if "\n\n" in user else ""
    if "<evidence>Film Alpha director was John Smith.</evidence>" in history or (
            FORCE_ANSWER in user and GOOD_QUERY in history):
        return f"{tag} So the answer is <answer>John Smith</answer>"
    if "<evidence>" in history or FORCE_ANSWER in user:
        return f"{tag} So the answer is <answer>Mary Jones</answer>"
    query = GOOD_QUERY if seed % 2 == 0 else BAD_QUERY
    return f"{tag} So the next query is <query>{query}</query>"


def fork_seed() -> int:
    """A run seed whose two root samples take different first queries."""
    for s in range(100):
        a, b = (derive_seed(s, "q1", "r", "expand", j) % 2 for j in (0, 1))
        if a != b:
            return s
    raise AssertionError("no seed found")


def config(**over: object) -> ReasonRagRunConfig:
    cfg = ReasonRagRunConfig.model_validate({"seed": fork_seed(), "concurrency": 1, "greedy_baseline": True,
                                          "mcts": {"iterations": 8, "max_children": 2, "max_iter": 4, "top_k": 1},
                                          "value": {"rollouts": 2}})
    return cfg.model_copy(update=over)


def run(tmp, llm, cfg=None, judge=None):
    """A run through the Python API on objects; returns the run's files and ``metrics.json``."""
    metrics = run_reasonrag(cfg or config(), tmp, llm=llm, retriever=retriever(), judge=judge, questions=[QUESTION])
    return RunFiles(RunDir(tmp, lock=False)), metrics


def test_chosen_side_at_the_fork_lies_on_the_correct_branch(tmp_path):
    pipe, metrics = run(tmp_path, ScriptedLLM(default=policy))
    tree = pipe.trees.read()[0]
    nodes = tree.by_id()
    root_kids = [nodes[c] for c in nodes["r"].children]
    assert {k.content for k in root_kids} == {GOOD_QUERY, BAD_QUERY}
    good = next(k.id for k in root_kids if k.content == GOOD_QUERY)
    fork = [p for p in pipe.pairs.read() if p.metadata["parent_id"] == "r"]
    assert fork, "the fork gave no pair"
    for p in fork:
        assert p.metadata["chosen_id"] == good and GOOD_QUERY in (p.chosen[0].content or "")
    # every pair's chosen side is on the good branch or in a subtree where both sides are
    for p in pipe.pairs.read():
        assert p.metadata["chosen_id"].startswith(good) or not p.metadata["rejected_id"].startswith(good)
    assert metrics["pairs"] == len(pipe.pairs.read()) > 0
    assert metrics["best_leaf_vs_greedy"]["mean_best_leaf_f1"] == 1.0
    assert (tmp_path / "dpo" / "trl_dpo.jsonl").exists() and (tmp_path / "dpo" / "dataset_info.json").exists()
    rec = json.loads((tmp_path / "dpo" / "trl_dpo.jsonl").read_text().splitlines()[0])
    assert rec["prompt"][0]["role"] == "system" and rec["chosen"][0]["role"] == "assistant"
    assert (tmp_path / "report.md").exists()


def test_forced_answer_leaves_are_real_scored_leaves(tmp_path):
    cfg = config(mcts=config().mcts.model_copy(update={"max_iter": 2, "iterations": 12}))
    pipe, _ = run(tmp_path, ScriptedLLM(default=policy), cfg)
    tree = pipe.trees.read()[0]
    forced = [n for n in tree.nodes if n.forced]
    # round 2 is forced, except after a query issued in round 1: the agent grounds it first (round 2)
    nodes = tree.by_id()
    assert forced and all(n.terminal and n.action == "answer" for n in forced)
    for n in forced:
        assert n.depth == (3 if nodes[n.parent or "r"].action == "evidence" else 2)
        assert n.score is not None and n.estimates and n.estimates[0].steps == n.depth
        assert n.estimates[0].v == n.score
    assert {n.answer for n in forced} == {"John Smith", "Mary Jones"}
    assert all(not n.terminal or not n.children for n in tree.nodes)  # terminal nodes never re-expanded


def test_judge_values(tmp_path):
    assert ProcessJudgement.model_validate_json('{"assessment": "fine.", "score": 0.35}').score == 0.35
    with pytest.raises(ValueError):
        ProcessJudgement.model_validate({"assessment": "too good", "score": 1.5})
    cfg = config(value=config().value.model_copy(update={"kind": "judge"}),
                 mcts=config().mcts.model_copy(update={"iterations": 16}))
    pipe, metrics = run(tmp_path, ScriptedLLM(default=policy), cfg)
    tree = pipe.trees.read()[0]
    for n in tree.nodes[1:]:
        assert len(n.estimates) == 1 and n.estimates[0].steps is None
        assert n.value_usage.calls == 1
    assert metrics["pairs"] > 0
    good = next(c for c in tree.by_id()["r"].children if tree.node(c).content == GOOD_QUERY)
    fork = [p for p in pipe.pairs.read() if p.metadata["parent_id"] == "r"]
    assert fork and all(p.metadata["chosen_id"] == good for p in fork)


class Killer(Exception):
    pass


class Counting:
    """A backend that logs each call it answers; raises ``Killer`` instead of answering call ``kill_at``."""

    def __init__(self, kill_at: int | None = None):
        self.inner, self.model, self.paid, self.kill_at = ScriptedLLM(default=policy), "scripted", 0, kill_at

    def chat(self, messages, **kw):
        if self.kill_at is not None and self.paid + 1 == self.kill_at:
            raise KeyboardInterrupt  # a kill in the middle of the search
        out = self.inner.chat(messages, **kw)
        self.paid += 1
        return out


def test_kill_and_resume_equals_uninterrupted_and_pays_no_call_twice(tmp_path):
    full = Counting()
    pipe_a, _ = run(tmp_path / "a", CachedLLM(full, tmp_path / "a.sqlite"))
    tree_a = pipe_a.trees.read()[0]

    first = Counting(kill_at=full.paid // 2)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", CachedLLM(first, tmp_path / "b.sqlite"))
    assert not (tmp_path / "b" / "trees.jsonl").read_text()
    assert (tmp_path / "b" / "events.jsonl").read_text()  # the iterations finished before the kill are kept
    second = Counting()
    pipe_b, _ = run(tmp_path / "b", CachedLLM(second, tmp_path / "b.sqlite"))
    tree_b = pipe_b.trees.read()[0]
    assert tree_b.model_dump() == tree_a.model_dump()
    assert first.paid + second.paid == full.paid
    assert [p.id for p in pipe_b.pairs.read()] == [p.id for p in pipe_a.pairs.read()]


def test_outage_leaves_the_question_unfinished(tmp_path):
    calls = [0]

    def flaky(messages, **kw):
        calls[0] += 1
        if calls[0] > 3:
            return LLMError("server down", is_retryable=True)
        return policy(messages, **kw)

    pipe, metrics = run(tmp_path, ScriptedLLM(default=flaky))
    assert metrics["unfinished"] == 1 and list(metrics["unfinished_items"]) == ["q1"]
    assert metrics["unfinished_by_stage"] == {"mcts": 1} and not pipe.trees.read() and not pipe.pairs.read()
    kept = len(pipe.events.read())
    pipe2, metrics2 = run(tmp_path, ScriptedLLM(default=policy))
    assert metrics2["unfinished"] == 0 and len(pipe2.trees.read()) == 1
    assert pipe2.trees.read()[0].iterations == 8 and kept < 8


def test_untagged_answer_extraction():
    assert untagged_answer("No.") == "No"
    assert untagged_answer("Yes.\n\nSo the answer is no. Really.") == "no"
    assert untagged_answer('The answer is "Tottenham Hotspur".') == "Tottenham Hotspur"
    assert untagged_answer("J. R. R. Tolkien wrote it. Later more") == "J. R. R. Tolkien wrote it"


def mumble(messages: list[Message], **kw: object) -> str:
    """A policy that never writes a tag (like a very small model)."""
    seed = int(kw.get("seed") or 0)
    return f"I think it is John Smith ({seed})." if seed % 3 == 0 else f"Maybe Mary Jones or someone ({seed})."


@pytest.mark.parametrize("accept", [False, True])
def test_untagged_outputs_are_spent_rounds(tmp_path, accept):
    mcts = config().mcts.model_copy(update={"max_iter": 2, "iterations": 6, "accept_untagged_answer": accept})
    pipe, metrics = run(tmp_path, ScriptedLLM(default=mumble), config(mcts=mcts))
    tree = pipe.trees.read()[0]
    first = [tree.node(c) for c in tree.node("r").children]
    assert first and all(n.action == "none" and n.stage == "reasoning" and n.flag for n in first)
    leaves = [n for n in tree.nodes if n.depth == 2]
    assert leaves and all(n.forced and n.terminal and n.action == "answer" for n in leaves)
    if accept:  # the untagged forced output is the answer, scored by F1
        assert all(n.answer == untagged_answer(n.response) and n.score is not None for n in leaves)
        assert all(n.score == f1(n.answer, QUESTION.golden_answers) for n in leaves)
        assert all(n.estimates[0].v == n.score and n.estimates[0].answer == n.answer for n in leaves)
    else:  # answerless leaves: every branch is pruned, no pair
        assert all(n.answer is None and n.score == 0.0 for n in leaves)
        assert metrics["pairs"] == 0
    for p in pipe.pairs.read():
        assert p.metadata["chosen_action"] != "none" and p.metadata["rejected_action"] != "none"
