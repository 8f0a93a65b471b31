"""Node values: Shortest Path Reward Estimation rollouts (§2.2.1, Eq. 1) and the process judge
(Appendix A, Eq. 6).

SPRE: from a new node, ``k`` rollouts continue the agent's rounds (same prompts, sampled at
``rollout_temperature``, each with its own derived seed) until an answer or the ``max_iter``-th
round, which forces one. Each rollout is an :class:`Estimate` with v = F1 against the gold
answers and ``steps`` = the total rounds of the trajectory, so Q = mean(v * alpha^steps) at
whatever alpha is asked. The k rollouts are independent and run at once. A terminal node needs no rollout: its k rollouts are its own answer (one
estimate of weight k). A rollout whose call fails as data (a request over the model's context
window, an empty output) ends there and its estimate is flagged: it carries no value (Eq. 1 skips
it) and the run counts it (``flagged_rollout`` in the mcts funnel row).

Judge: the judge LLM reads the question, the gold answer(s) and y_{1:t} and answers with a JSON
object :class:`ProcessJudgement` (a brief assessment and the score S in [0, 1]). A request over the
judge's context window flags the node (no estimate); a reply that is not a valid judgement is asked
again and, failing that, leaves the evaluation unfinished (a retryable ``ParseError``: the question
stays unfinished, a rerun redoes it); every other LLM failure propagates (failure policy).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentrag.agents.reason_ground import forced_round
from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.errors import ParseError
from agentrag.eval.metrics import f1
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Message, QAItem, Usage
from agentrag.synth.common import call_json_resampled, derive_seed
from agentrag.synth.reasonrag.config import ReasonRagConfig
from agentrag.synth.reasonrag.step import take_step
from agentrag.synth.reasonrag.tree import Estimate, SearchTree, TreeNode
from agentrag.threads import parallel_calls

PROCESS_JUDGE_SYSTEM = """\
You grade the intermediate reasoning of an agent that answers a question with a search tool. \
You are given the question, the correct answer, and the agent's steps so far (its thoughts, \
queries, extracted evidence and possibly a final answer).
Judge strictly whether these steps are on the way to the correct answer:
- Point out every mistake: wrong facts, wrong or useless queries, evidence that does not support \
the claim, contradictions, and answers that differ from the correct one.
- Reward steps that retrieve and use exactly the information the question needs.
- Be severe: never give full marks to reasoning with any flaw, even if its answer looks close.
Reply with a JSON object {"assessment": "<a brief assessment>", "score": S}
where S is a number between 0 and 1 (1 = flawless and leads to the correct answer)."""

PROCESS_JUDGE_USER = "Question: {question}\nCorrect answer: {answer}\n\nAgent's steps so far:\n{steps}"


class ProcessJudgement(BaseModel):
    """The judge's reply of Eq. 6: a brief assessment, then the score S of the partial trajectory."""

    model_config = ConfigDict(extra="forbid")

    assessment: str = Field(default="", max_length=2000, description="brief assessment of the steps so far")
    score: float = Field(ge=0.0, le=1.0, description="1 = flawless and leads to the correct answer")


def judge_messages(item: QAItem, steps: list[str]) -> list[Message]:
    """The judge's prompt for the partial trajectory ``steps`` (y_{1:t}) of ``item``."""
    user = PROCESS_JUDGE_USER.format(question=item.question, answer=" / ".join(item.golden_answers),
                                     steps="\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, start=1)))
    return [Message(role="system", content=PROCESS_JUDGE_SYSTEM), Message(role="user", content=user)]


#: judge calls per evaluation before a reply that does not parse leaves it unfinished (the first
#: at temperature 0; the others sampled, each with its own derived seed)
JUDGE_ATTEMPTS = 3


def judge_estimate(judge: LLM, item: QAItem, steps: list[str], node: TreeNode,
                   max_tokens: int, seed: int = 0) -> tuple[Estimate | None, Usage, str | None]:
    """Eq. 6: v(s) from the judge for the partial trajectory ``steps`` (y_{1:t}). Returns the
    estimate, the judge's usage, and (estimate None) the reason: only a request over the judge's
    context window, which is data (the node is flagged). A reply that is not a valid judgement is
    asked again (:data:`JUDGE_ATTEMPTS` in all); when none is, :class:`~agentrag.errors.ParseError`
    (retryable) leaves the evaluation unfinished under the failure policy: the iteration is not
    recorded and a rerun redoes it, so a judge's bad replies never drop a branch for good."""
    def sampling(attempt: int) -> dict[str, Any]:
        if not attempt:
            return {"temperature": 0.0, "max_tokens": max_tokens}
        return {"temperature": 0.7, "max_tokens": max_tokens,
                "seed": derive_seed(seed, item.id, node.id, "judge", attempt)}

    verdict, provs, errors = call_json_resampled(judge, judge_messages(item, steps), ProcessJudgement,
                                                 attempts=JUDGE_ATTEMPTS, sampling=sampling, stage="reasonrag.judge")
    usage = Usage()
    for prov in provs:
        usage = usage + (prov.usage if prov.usage.calls else prov.usage + Usage(calls=1))
    if verdict is not None:
        return Estimate(v=verdict.score, steps=None, answer=node.answer, origin=node.id), usage, None
    if errors[-1].startswith("context_limit"):
        return None, usage, f"judge: {errors[-1]}"
    raw = (provs[-1].raw_output or "")[-200:]
    last = errors[-1] + (f" (output {raw!r})" if raw else "")
    raise ParseError(f"judge: no valid judgement of node {node.id} in {JUDGE_ATTEMPTS} attempts; last: {last}. "
                     "The evaluation is left unfinished: rerun to redo it", is_retryable=True)


def spre_estimates(llm: LLM, retriever: Retriever, cfg: ReasonRagConfig, item: QAItem, tree: SearchTree,
                   node: TreeNode) -> tuple[list[Estimate], Usage]:
    """Eq. 1 samples for ``node``: k rollouts to an answer (or the node's own answer if terminal).

    The k rollouts are independent (each draws its own derived seeds), so they run at once
    (:func:`agentrag.threads.parallel_calls`); estimates and the usage sum are those of the
    rollouts made one after another, and an outage in any of them propagates as it did then."""
    k, golds = cfg.value.rollouts, item.golden_answers
    if node.terminal:
        return [Estimate(v=f1(node.answer, golds), steps=node.depth, answer=node.answer, weight=k,
                         origin=node.id)], Usage()
    y0 = [n.response for n in tree.path(node.parent or "r")[1:]] + [node.response]
    done = parallel_calls([partial(_rollout, llm, retriever, cfg, item, node, y0, i) for i in range(k)],
                          name="reasonrag-rollout")
    usage = Usage()
    for _, u in done:
        usage = usage + u
    return [e for e, _ in done], usage


def _rollout(llm: LLM, retriever: Retriever, cfg: ReasonRagConfig, item: QAItem, node: TreeNode, y0: list[str],
             i: int) -> tuple[Estimate, Usage]:
    """The ``i``-th SPRE rollout from ``node`` (whose trajectory so far is ``y0``): its estimate and usage."""
    m, golds = cfg.mcts, item.golden_answers
    usage = Usage()
    y, query, docs = list(y0), node.query, node.documents or NO_DOCUMENTS
    stage: str = node.stage
    answer: str | None = None
    depth = node.depth
    flag: str | None = None
    while True:
        forced = forced_round(depth, stage, m.max_iter)
        sampling = {"temperature": cfg.value.rollout_temperature, "max_tokens": m.max_tokens,
                    "seed": derive_seed(cfg.seed, item.id, node.id, "rollout", i, depth)}
        step = take_step(llm, retriever, item.question, y, stage, query, docs, forced=forced,
                         top_k=m.top_k, sampling=sampling, accept_untagged_answer=m.accept_untagged_answer,
                         doc_chars=m.doc_chars)
        usage = usage + step.usage
        depth += 1
        if step.context_limited or not step.raw:  # a failed call: the rollout ends, its estimate flagged
            flag = (step.error or "context_limit") if step.context_limited else "empty output"
            break
        y.append(step.text)  # as the agent does: every output joins y (a malformed one: its text before its tags)
        if step.action == "answer":
            answer = step.content or None
            break
        if forced:  # the forced round gave no answer: the rollout ends answerless
            break
        if step.action is not None and step.error is None:
            stage, query, docs = step.stage, step.query, step.documents
    return Estimate(v=f1(answer, golds), steps=depth, answer=answer, origin=f"{node.id}/rollout{i}",
                    flag=flag), usage


__all__ = ["PROCESS_JUDGE_SYSTEM", "ProcessJudgement", "judge_messages", "judge_estimate", "spre_estimates"]
