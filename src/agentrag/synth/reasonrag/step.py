"""One round of Algorithm 1 from a state (x, y, stage): the prompt, one sample, its parsed action,
and the retrieval for a query. Shared by the tree's expansions (:mod:`.mcts`) and the SPRE
rollouts (:mod:`.values`); it imports neither.

The failure policy (:func:`agentrag.errors.classify`): a request over the model's context window
is data (a step with ``error`` ``context_limit: ...`` and no text); an output without the stage's
tag is data (a step with ``action`` None and the reason in ``error``); so is a malformed output
(the one protocol parser, :mod:`agentrag.protocol`: an unclosed, mis-cased or nested tag, an
``<answer>`` followed by a ``<query>``): ``action`` None, ``malformed`` and ``error`` name the
reason, and its step text is only what preceded its first tag. Every other LLM or retrieval
failure propagates (an outage leaves the question unfinished, a 401/404 stops the run).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agentrag.agents.reason_ground import QUERY_STOP, parse_step, stage_messages
from agentrag.agents.tools import NO_DOCUMENTS, format_documents
from agentrag.errors import ContextLimitError
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Hit, Usage
from agentrag.synth.common import prompt_hash

log = logging.getLogger(__name__)

NEXT_STAGE = {"query": "grounding", "evidence": "reasoning", "answer": "terminal"}


@dataclass
class StepOut:
    """One round: the step y_i (the output cut at the stop sequence, exactly as the agent keeps
    it), its parsed action, the state it leads to, and the uncut output in ``raw``."""

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
    raw: str = ""
    malformed: str | None = None

    @property
    def context_limited(self) -> bool:
        """The request did not fit the model's context window (no output)."""
        return (self.error or "").startswith("context_limit")


def take_step(llm: LLM, retriever: Retriever, question: str, y: list[str], stage: str, query: str,
              documents: str, *, forced: bool, top_k: int, sampling: dict[str, Any],
              accept_untagged_answer: bool = False, doc_chars: int | None = None) -> StepOut:
    """One round from state (x, y, stage): prompt, sample, parse, and retrieve for a query (see the
    module docstring for what becomes data and what propagates)."""
    messages = stage_messages(question, y, stage, query, documents, forced=forced)
    ph = prompt_hash(messages, sampling)
    try:
        completion = llm.chat(messages, stop=[QUERY_STOP], **sampling)[0]
    except ContextLimitError as exc:
        log.info("request over the model's context window (stage %s, %d rounds): %s", stage, len(y), exc)
        return StepOut("", None, None, stage, query, documents, error=f"context_limit: {exc}", prompt_hash=ph)
    raw = (completion.text or "").strip()
    usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    step = parse_step(raw, forced=forced, accept_untagged_answer=accept_untagged_answer,
                      stopped=completion.finish_reason != "length")
    action, content = step.action, step.content
    out = StepOut(step.text, action, content, stage, query, documents, usage=usage, prompt_hash=ph,
                  finish_reason=completion.finish_reason, raw=raw, malformed=step.malformed)
    if action is None:
        out.error = (f"malformed turn: {step.malformed}" if step.malformed else
                     "the forced final round gave no <answer>" if forced else
                     "no <evidence> in grounding output" if stage == "grounding" else
                     "no <query> or <answer> in reasoning output")
        return out
    out.stage = NEXT_STAGE[action]
    if action == "query" and not content:  # an empty <query>: Grounding with no documents (as the agent)
        out.query, out.documents = "", NO_DOCUMENTS
    elif action == "query":
        hits = retriever.search([content or ""], top_k)[0]
        # escaped exactly as the reason_ground agent's tool does, so the tree's steps are its steps
        out.query, out.hits, out.documents = content or "", hits, format_documents(hits, neutralize=True,
                                                                                  doc_chars=doc_chars)
    return out


__all__ = ["StepOut", "take_step", "NEXT_STAGE"]
