"""MCTS over reason_ground steps for one question (§2.2.2, Appendix A).

Each iteration selects a node (Eq. 5), samples ONE new action from it with the agent's own
prompts and parsing (``agents.reason_ground.stage_messages`` / ``parse_action``), values the new
node — SPRE rollouts (Eq. 1, :mod:`.values`) or the judge (Eq. 6) — and backpropagates (Eq. 7).
Every sample's seed is derived from (run seed, question id, node id, sample index), so a resumed
search draws the same samples as an uninterrupted one and the LLM cache answers those already paid.

Outages (a retryable LLMError / RetrievalError) end the batch: the events so far are returned
with status ``outage`` and the question stays unfinished. A non-retryable failure (an empty
output, a failed call or retrieval) is an ``error`` event: the sample is spent, the raw output and
reason are kept. An output without the stage's tag becomes a flagged ``none`` node.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from agentrag.agents.reason_ground import parse_action, stage_messages
from agentrag.agents.tools import NO_DOCUMENTS, format_documents
from agentrag.errors import LLMError, ParseError, RetrievalError, RunError
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Hit, Provenance, QAItem, Usage
from agentrag.synth.common import derive_seed, prompt_hash
from agentrag.synth.reasonrag.config import ReasonRagConfig
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree, TreeNode, select
from agentrag.synth.reasonrag.values import judge_estimate, spre_estimates

log = logging.getLogger(__name__)

Status = Literal["running", "done", "exhausted", "outage"]
_NEXT_STAGE = {"query": "grounding", "evidence": "reasoning", "answer": "terminal"}


@dataclass
class StepOut:
    """One round of Algorithm 1: the output text, its parsed action, the state it leads to."""

    text: str
    action: str | None
    content: str | None
    stage: str
    query: str
    documents: str
    hits: list[Hit] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    prompt_hash: str = ""
    finish_reason: str | None = None


def take_step(llm: LLM, retriever: Retriever, question: str, y: list[str], stage: str, query: str,
              documents: str, *, forced: bool, top_k: int, sampling: dict[str, Any],
              accept_untagged_answer: bool = False) -> StepOut:
    """One round from state (x, y, stage): prompt, sample, parse, and retrieve for a query.

    Retryable LLM / retrieval failures propagate (outage); other failures come back as ``error``."""
    messages = stage_messages(question, y, stage, query, documents, forced=forced)
    ph = prompt_hash(messages, sampling)
    try:
        completion = llm.chat(messages, **sampling)[0]
    except (LLMError, ParseError) as exc:
        if exc.is_retryable:
            raise
        return StepOut("", None, None, stage, query, documents, usage=Usage(calls=1),
                       error=f"{type(exc).__name__}: {exc}", prompt_hash=ph)
    text = (completion.text or "").strip()
    usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    action, content = parse_action(text, stage, forced=forced, accept_untagged_answer=accept_untagged_answer)
    out = StepOut(text, action, content, stage, query, documents, usage=usage, prompt_hash=ph,
                  finish_reason=completion.finish_reason)
    if action is None:
        out.error = ("the forced final round gave no <answer>" if forced else
                     "no <evidence> in grounding output" if stage == "grounding" else
                     "no <query> or <answer> in reasoning output")
        return out
    out.stage = _NEXT_STAGE[action]
    if action == "query":
        try:
            hits = retriever.search([content or ""], top_k)[0]
        except RetrievalError as exc:
            if exc.is_retryable:
                raise
            out.error = f"retrieval failed: {exc}"
            return out
        # escaped exactly as the reason_ground agent's tool does, so the tree's steps are its steps
        out.query, out.hits, out.documents = content or "", hits, format_documents(hits, neutralize=True)
    return out


class QuestionSearch:
    """The MCTS of one question over ``llm`` and ``retriever`` (``judge`` for ``value.kind=judge``)."""

    def __init__(self, item: QAItem, llm: LLM, retriever: Retriever, cfg: ReasonRagConfig,
                 judge: LLM | None = None) -> None:
        self.item, self.llm, self.retriever, self.cfg = item, llm, retriever, cfg
        self.judge = judge or llm

    def replay(self, events: list[IterationEvent]) -> SearchTree:
        return SearchTree.replay(self.item.id, self.item.question, self.item.golden_answers, events)

    def finished(self, tree: SearchTree) -> Status | None:
        if tree.iterations >= self.cfg.mcts.iterations:
            return "done"
        m = self.cfg.mcts
        if select(tree, m.max_children, m.c_uct, self.cfg.value.alpha_search) is None:
            return "exhausted"
        return None

    def iterate(self, events: list[IterationEvent], budget: int = 1) -> tuple[list[IterationEvent], Status]:
        """Run up to ``budget`` iterations after ``events``; returns the new events and the status."""
        tree = self.replay(events)
        new: list[IterationEvent] = []
        m = self.cfg.mcts
        for _ in range(budget):
            status = self.finished(tree)
            if status is not None:
                return new, status
            parent = select(tree, m.max_children, m.c_uct, self.cfg.value.alpha_search)
            if parent is None:  # not reached: finished() said the tree is open
                return new, "exhausted"
            try:
                ev = self.expand(tree, parent)
            except RunError as exc:
                if not exc.is_retryable:
                    raise
                log.warning("question %s: outage during iteration %d: %s", self.item.id, tree.iterations, exc)
                return new, "outage"
            tree.apply(ev)
            new.append(ev)
        return new, self.finished(tree) or "running"

    def expand(self, tree: SearchTree, parent: TreeNode) -> IterationEvent:
        """Expansion: one sampled action from ``parent`` (temperature > 0), valued and returned as
        an event (the caller applies it). Identical responses to a sibling are duplicates."""
        m, j = self.cfg.mcts, parent.samples
        forced = parent.depth == m.max_iter - 1
        y = [n.response for n in tree.path(parent.id)[1:]]
        sampling = {"temperature": m.temperature, "max_tokens": m.max_tokens,
                    "seed": derive_seed(self.cfg.seed, self.item.id, parent.id, "expand", j)}
        out = take_step(self.llm, self.retriever, self.item.question, y, parent.stage, parent.query,
                        parent.documents or NO_DOCUMENTS, forced=forced, top_k=m.top_k, sampling=sampling,
                        accept_untagged_answer=m.accept_untagged_answer)
        base: dict[str, Any] = {"id": f"{self.item.id}:{tree.iterations}", "question_id": self.item.id,
                "iteration": tree.iterations, "selected": parent.id, "raw": out.text, "usage": out.usage}
        if not out.text or (out.error and out.action is not None):  # a failed call, or a failed retrieval
            return IterationEvent(outcome="error", reason=out.error or "empty output", **base)
        siblings = {tree.node(c).response for c in parent.children}
        if out.text in siblings:
            return IterationEvent(outcome="duplicate", reason="same response as a sibling", **base)
        golds = self.item.golden_answers
        # an untagged output is a spent round (Algorithm 1): action "none", stage unchanged; a forced
        # round always ends the trajectory (an untagged forced output is an answerless leaf)
        action = out.action or ("answer" if forced else "none")
        node = TreeNode(id=f"{parent.id}.{j}", parent=parent.id, depth=parent.depth + 1,
                        action=action,  # type: ignore[arg-type]
                        stage="terminal" if forced else out.stage,  # type: ignore[arg-type]
                        response=out.text, content=out.content, query=out.query, documents=out.documents,
                        hits=out.hits, forced=forced, usage=out.usage, flag=out.error,
                        provenance=Provenance(stage="reasonrag.expand", model=str(getattr(self.llm, "model", "")),
                                              prompt_hash=out.prompt_hash, raw_output=out.text, usage=out.usage))
        if node.action == "answer":
            from agentrag.eval.metrics import f1

            node.answer = (out.content or None) if out.action == "answer" else None
            node.score = f1(node.answer, golds)
        if self.cfg.value.kind == "spre":
            node.estimates, node.value_usage = spre_estimates(self, tree, node)
        else:
            est, node.value_usage, flag = judge_estimate(self.judge, self.item, y + [node.response], node,
                                                         self.cfg.value.judge_max_tokens)
            node.estimates = [est] if est is not None else []
            node.flag = "; ".join(f for f in (node.flag, flag) if f) or None
        return IterationEvent(outcome="child", node=node, **base)


__all__ = ["QuestionSearch", "StepOut", "take_step"]
