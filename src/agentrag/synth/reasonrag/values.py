"""Node values: Shortest Path Reward Estimation rollouts (§2.2.1, Eq. 1) and the process judge
(Appendix A, Eq. 6).

SPRE: from a new node, ``k`` rollouts continue the agent's rounds (same prompts, sampled at
``rollout_temperature``, each with its own derived seed) until an answer or the ``max_iter``-th
round, which forces one. Each rollout is an :class:`Estimate` with v = F1 against the gold
answers and ``steps`` = the total rounds of the trajectory, so Q = mean(v * alpha^steps) at
whatever alpha is asked (0.95 while searching, 0.9 for labels). A terminal node needs no
rollout: its k rollouts are its own answer (one estimate of weight k).

Judge: the judge LLM reads the question, the gold answer(s) and y_{1:t} and ends with
"So the score is S", S in [0, 1]. Output without a score flags the node (no estimate).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.errors import LLMError, ParseError
from agentrag.eval.metrics import f1
from agentrag.llm.base import LLM
from agentrag.records import Message, QAItem, Usage
from agentrag.synth.common import derive_seed
from agentrag.synth.reasonrag.tree import Estimate, SearchTree, TreeNode

if TYPE_CHECKING:
    from agentrag.synth.reasonrag.mcts import QuestionSearch

PROCESS_JUDGE_SYSTEM = """\
You grade the intermediate reasoning of an agent that answers a question with a search tool. \
You are given the question, the correct answer, and the agent's steps so far (its thoughts, \
queries, extracted evidence and possibly a final answer).
Judge strictly whether these steps are on the way to the correct answer:
- Point out every mistake: wrong facts, wrong or useless queries, evidence that does not support \
the claim, contradictions, and answers that differ from the correct one.
- Reward steps that retrieve and use exactly the information the question needs.
- Be severe: never give full marks to reasoning with any flaw, even if its answer looks close.
Write a brief assessment, then end with: So the score is S
where S is a number between 0 and 1 (1 = flawless and leads to the correct answer)."""

PROCESS_JUDGE_USER = "Question: {question}\nCorrect answer: {answer}\n\nAgent's steps so far:\n{steps}"

_SCORE_RE = re.compile(r"score\s+is\s*:?\s*\[?\s*(\d*\.?\d+)", re.IGNORECASE)


def parse_process_score(text: str) -> float:
    """S of the last "score is S" in ``text``; ParseError when there is none or it is outside [0, 1]."""
    found = _SCORE_RE.findall(text)
    if not found:
        raise ParseError(f"no 'So the score is S' in the judge output {text[-200:]!r}")
    value = float(found[-1])
    if not 0.0 <= value <= 1.0:
        raise ParseError(f"judge score {value!r} is outside [0, 1]")
    return value


def judge_estimate(judge: LLM, item: QAItem, steps: list[str], node: TreeNode,
                   max_tokens: int) -> tuple[Estimate | None, Usage, str | None]:
    """Eq. 6: v(s) from the judge for the partial trajectory ``steps`` (y_{1:t}). Returns the
    estimate (None on a failed judgment), the judge's usage, and the failure reason."""
    user = PROCESS_JUDGE_USER.format(question=item.question, answer=" / ".join(item.golden_answers),
                                     steps="\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, start=1)))
    messages = [Message(role="system", content=PROCESS_JUDGE_SYSTEM), Message(role="user", content=user)]
    try:
        completion = judge.chat(messages, temperature=0.0, max_tokens=max_tokens)[0]
    except (LLMError, ParseError) as exc:
        if exc.is_retryable:
            raise
        return None, Usage(calls=1), f"judge failed: {type(exc).__name__}: {exc}"
    usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    try:
        v = parse_process_score(completion.text or "")
    except ParseError as exc:
        return None, usage, f"judge: {exc}"
    return Estimate(v=v, steps=None, answer=node.answer, origin=node.id), usage, None


def spre_estimates(search: QuestionSearch, tree: SearchTree, node: TreeNode) -> tuple[list[Estimate], Usage]:
    """Eq. 1 samples for ``node``: k rollouts to an answer (or the node's own answer if terminal)."""
    from agentrag.synth.reasonrag.mcts import take_step

    cfg, item = search.cfg, search.item
    k, golds = cfg.value.rollouts, item.golden_answers
    if node.terminal:
        return [Estimate(v=f1(node.answer, golds), steps=node.depth, answer=node.answer, weight=k,
                         origin=node.id)], Usage()
    m = cfg.mcts
    y0 = [n.response for n in tree.path(node.parent or "r")[1:]] + [node.response]
    usage = Usage()
    out: list[Estimate] = []
    for i in range(k):
        y, query, docs = list(y0), node.query, node.documents or NO_DOCUMENTS
        stage: str = node.stage
        answer: str | None = None
        depth = node.depth
        while depth < m.max_iter:
            forced = depth == m.max_iter - 1
            sampling = {"temperature": cfg.value.rollout_temperature, "max_tokens": m.max_tokens,
                        "seed": derive_seed(cfg.seed, item.id, node.id, "rollout", i, depth)}
            step = take_step(search.llm, search.retriever, item.question, y, stage, query, docs, forced=forced,
                             top_k=m.top_k, sampling=sampling, accept_untagged_answer=m.accept_untagged_answer)
            usage = usage + step.usage
            depth += 1
            if step.text:
                y.append(step.text)  # as the agent does: every output joins y, a malformed one too
            if step.action == "answer":
                answer = step.content or None
                break
            if step.action is not None and step.error is None:
                stage, query, docs = step.stage, step.query, step.documents
        out.append(Estimate(v=f1(answer, golds), steps=depth, answer=answer, origin=f"{node.id}/rollout{i}"))
    return out, usage


__all__ = ["PROCESS_JUDGE_SYSTEM", "parse_process_score", "judge_estimate", "spre_estimates"]
