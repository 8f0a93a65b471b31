"""MCTS over reason_ground steps for one question (§2.2.2, Appendix A).

Each iteration selects a node (Eq. 5), samples ONE new action from it with the agent's own
prompts and parsing (``agents.reason_ground.stage_messages`` / ``parse_action``), values the new
node — SPRE rollouts (Eq. 1, :mod:`.values`) or the judge (Eq. 6) — and backpropagates (Eq. 7).
Every sample's seed is derived from (run seed, question id, node id, sample index), so a resumed
search draws the same samples as an uninterrupted one and the LLM cache answers those already paid.

Failures follow the one failure policy (:func:`agentrag.errors.classify`): an outage ends the
batch, the events so far are returned with status ``outage`` and the question stays unfinished
(a rerun continues it); a 401/404 or any other failure propagates. Model output is data: an empty
output or a request over the context window is an ``error`` event (the sample is spent, the raw
output and reason kept), an output without the stage's tag a flagged ``none`` node.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, NamedTuple

from agentrag.agents.reason_ground import forced_round
from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.errors import classify
from agentrag.eval.metrics import f1
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Provenance, QAItem
from agentrag.synth.common import derive_seed
from agentrag.synth.reasonrag.config import ReasonRagConfig
from agentrag.synth.reasonrag.step import StepOut, take_step
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree, TreeNode, select
from agentrag.synth.reasonrag.values import judge_estimate, spre_estimates

log = logging.getLogger(__name__)

Status = Literal["running", "done", "exhausted", "outage"]


class SearchBatch(NamedTuple):
    """What :meth:`QuestionSearch.iterate` gives back: the new events, the search's status, and the
    outage that ended the batch (status ``outage``)."""

    events: list[IterationEvent]
    status: Status
    outage: str | None = None


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
        if select(tree, m.max_children, m.c_uct, self.cfg.value.search_alpha) is None:
            return "exhausted"
        return None

    def iterate(self, events: list[IterationEvent], budget: int = 1) -> SearchBatch:
        """Run up to ``budget`` iterations after ``events``; returns the new events and the status."""
        tree = self.replay(events)
        new: list[IterationEvent] = []
        m = self.cfg.mcts
        for _ in range(budget):
            status = self.finished(tree)
            if status is not None:
                return SearchBatch(new, status)
            parent = select(tree, m.max_children, m.c_uct, self.cfg.value.search_alpha)
            if parent is None:  # not reached: finished() said the tree is open
                return SearchBatch(new, "exhausted")
            try:
                ev = self.expand(tree, parent)
            except Exception as exc:  # the policy decides: only an outage ends the batch, kept events
                if classify(exc) != "outage":
                    raise
                log.warning("question %s: outage during iteration %d: %s", self.item.id, tree.iterations, exc)
                return SearchBatch(new, "outage", f"{type(exc).__name__}: {exc}")
            tree.apply(ev)
            new.append(ev)
        return SearchBatch(new, self.finished(tree) or "running")

    def expand(self, tree: SearchTree, parent: TreeNode) -> IterationEvent:
        """Expansion: one sampled action from ``parent`` (temperature > 0), valued and returned as
        an event (the caller applies it). Identical responses to a sibling are duplicates."""
        m, j = self.cfg.mcts, parent.samples
        forced = forced_round(parent.depth, parent.stage, m.max_iter)
        y = [n.response for n in tree.path(parent.id)[1:]]
        sampling = {"temperature": m.temperature, "max_tokens": m.max_tokens,
                    "seed": derive_seed(self.cfg.seed, self.item.id, parent.id, "expand", j)}
        out = take_step(self.llm, self.retriever, self.item.question, y, parent.stage, parent.query,
                        parent.documents or NO_DOCUMENTS, forced=forced, top_k=m.top_k, doc_chars=m.doc_chars,
                        sampling=sampling,
                        accept_untagged_answer=m.accept_untagged_answer)
        base: dict[str, Any] = {"id": f"{self.item.id}:{tree.iterations}", "question_id": self.item.id,
                "iteration": tree.iterations, "selected": parent.id, "raw": out.raw, "usage": out.usage}
        if not out.raw:  # a request over the context window, or an empty output: the sample is spent
            return IterationEvent(outcome="error", reason=out.error or "empty output", **base)
        siblings = {tree.node(c).response for c in parent.children}
        if out.text in siblings:
            return IterationEvent(outcome="duplicate", reason="same response as a sibling", **base)
        golds = self.item.golden_answers
        # an untagged output is a spent round (Algorithm 1): action "none", stage unchanged; a malformed
        # one too, action "malformed" (flagged: no pair uses it); a forced round always ends the
        # trajectory (an untagged or malformed forced output is an answerless leaf)
        action = out.action or ("answer" if forced else "malformed" if out.malformed else "none")
        node = TreeNode(id=f"{parent.id}.{j}", parent=parent.id, depth=parent.depth + 1,
                        action=action,  # type: ignore[arg-type]
                        stage="terminal" if forced else out.stage,  # type: ignore[arg-type]
                        response=out.text, content=out.content, query=out.query, documents=out.documents,
                        hits=out.hits, forced=forced, usage=out.usage, flag=out.error,
                        # the step as the agent keeps it; the uncut output stays in the event's ``raw``
                        provenance=Provenance(stage="reasonrag.expand", model=str(getattr(self.llm, "model", "")),
                                              prompt_hash=out.prompt_hash, raw_output=out.text, usage=out.usage))
        if node.action == "answer":
            node.answer = (out.content or None) if out.action == "answer" else None
            node.score = f1(node.answer, golds)
        if self.cfg.value.kind == "spre":
            node.estimates, node.value_usage = spre_estimates(self.llm, self.retriever, self.cfg, self.item, tree, node)
        else:
            est, node.value_usage, flag = judge_estimate(self.judge, self.item, y + [node.response], node,
                                                         self.cfg.value.judge_max_tokens, seed=self.cfg.seed)
            node.estimates = [est] if est is not None else []
            node.flag = "; ".join(f for f in (node.flag, flag) if f) or None
        return IterationEvent(outcome="child", node=node, **base)


__all__ = ["QuestionSearch", "SearchBatch", "Status", "StepOut", "take_step"]
