"""QA synthesis (§3.2, Eq. 6) from a selected path, and the rejection rules.

The generator sees the path's observations, actions and intents (negative documents marked as
such) and reverse-engineers a question that needs the whole chain. A result is rejected, with
the reason recorded, for: ``schema_failure``; ``answer_in_question`` (the answer, or any 3-word
span of it, inside the question, on normalized forms, unless the question offers it as one of
its alternatives: "X or Y?"); ``explanation_question`` (it asks why,
how, for a reason or a cause); ``explanation_answer`` ("because ..."); ``answer_too_long``
(more than one sentence or more than ``qa.max_answer_words``, 8, words); ``too_few_hops``
(fewer than ``min_hops`` hops grounded in the path's documents by a quotation with at least
three content words, see :mod:`.grounding`).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrag.errors import ParseError
from agentrag.llm.base import LLM
from agentrag.llm.structured import validate_structured
from agentrag.records import Message
from agentrag.synth.common import call_json
from agentrag.synth.ragshaper.config import QAConfig
from agentrag.synth.ragshaper.grounding import (
    MIN_CONTENT_WORDS,
    answer_span_in_question,
    explanation_answer,
    explanation_question,
    ground_steps,
    grounded_hops,
    tokens,
)
from agentrag.synth.ragshaper.schema import DocRef, PathRecord, QARecord, TreeNode

SYSTEM = (
    "You turn an exploration record into one hard but fair question-answer pair.\n"
    "Question: a natural, self-contained factual question of at most two sentences whose answer "
    "is one specific fact (a name, date, place, number or yes/no). No 'how', 'why' or 'describe' "
    "questions. It must need at least three dependent hops, each hop using what the previous one "
    "found (a chain, not a checklist of independent facts). It must not contain the answer and "
    "must not state the asked attribute outright. Never mention documents, searches, steps or "
    "the exploration.\n"
    "Negative documents: if the record contains negative documents, word the question so that a "
    "careless reader could be misled by at least one of them, while the true answer stays "
    "supported by the positive evidence.\n"
    "Answer: a short phrase naming one entity or value, at most one sentence, no filler.\n"
    "Also give reasoning_steps (one per hop: the fact, the evidence copied word for word from one "
    "evidence document of the record, the output of the hop) and negative_aspect (for each negative document used: its dimension, the "
    "misleading claim, how to disambiguate it, and the distracting text). Reply with JSON only.")


class ReasoningStep(BaseModel):
    """One hop of the chain: the fact, the evidence quoted from a path document, its output."""

    model_config = ConfigDict(extra="ignore")

    hop: int | None = None
    fact: str = Field(default="", max_length=200)
    evidence: str = Field(default="", max_length=240)
    output: str = Field(default="", max_length=80)


class NegativeAspect(BaseModel):
    """How one negative (distractor) document of the path can mislead, and how to tell it apart."""

    model_config = ConfigDict(extra="ignore")

    dimension: Literal["doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy"]
    misleading_claim: str = Field(default="", max_length=200)
    disambiguation: str = Field(default="", max_length=200)
    distraction_text: str = Field(default="", max_length=240)


class QAPair(BaseModel):
    """The Eq. 6 output; strings and lists are bounded so constrained decoding terminates."""

    model_config = ConfigDict(extra="ignore")

    question: str = Field(max_length=300)
    answer: str = Field(max_length=300)
    reasoning_steps: list[ReasoningStep] = Field(max_length=6)
    negative_aspect: list[NegativeAspect] = Field(default_factory=list, max_length=3)


def render_for_qa(seed: str, nodes: list[TreeNode], max_chars: int = 500) -> str:
    """Eq. 6 input: (o_1, a_1, i_1, ..., o_N, a_N, i_N) of the path."""
    lines = [f"Seed entity: {seed}"]
    for i, n in enumerate(nodes[1:], start=1):
        if n.action is None:
            continue
        args = ", ".join(f"{k}={str(v)[:120]!r}" for k, v in n.action.arguments.items() if k != "original_fact")
        lines.append(f"\nStep {i}. action: {n.action.name}({args})\nintent: {n.intent}")
        for d in n.docs:
            tag = f"NEGATIVE document ({d.distractor_type})" if d.distractor_type else "evidence"
            lines.append(f"- {tag}: [{d.title}] {d.text[:max_chars]}")
        if not n.docs:
            lines.append(f"- observation: {n.observation[:max_chars]}")
    return "\n".join(lines)


def answer_in_question(question: str, answer: str) -> bool:
    """The whole answer occurs in the question, compared on normalized forms
    (:func:`~agentrag.synth.ragshaper.grounding.tokens`: "&"/"and", "U.S."/"US", punctuation)."""
    a = " ".join(tokens(answer))
    return bool(a) and f" {a} " in f" {' '.join(tokens(question))} "


def answer_is_a_choice(question: str, answer: str) -> bool:
    """The question offers alternatives and the answer is one of them ("Which opened first, X or
    Y?" -> "Y"): a comparison question, where the answer is in the question by design."""
    a, q = " ".join(tokens(answer)), f" {' '.join(tokens(question))} "
    return bool(a) and " or " in q and (f" {a} or " in q or f" or {a} " in q)


_SENTENCE_END = re.compile(r"(?<![A-Z])[.!?]\s+(?=[A-Z0-9])")


def sentence_count(text: str) -> int:
    return len([s for s in _SENTENCE_END.split(text.strip()) if s.strip()])


def check_qa(obj: QAPair | dict[str, Any] | None, cfg: QAConfig,
             docs: list[DocRef] | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """(rejection reason or None, per-step grounding) for a generated QA pair (a decoded object
    is validated as :class:`QAPair` first). The hops are counted against ``docs``, the documents
    of the path (none given: no hop is grounded)."""
    if obj is None:
        return "schema_failure: no JSON object", []
    if not isinstance(obj, QAPair):
        try:
            obj = validate_structured(obj, QAPair)
        except ParseError as exc:
            return f"schema_failure: {exc}", []
    q, a = obj.question, obj.answer
    if not q.strip():
        return "schema_failure: 'question' missing or empty", []
    if not a.strip():
        return "schema_failure: 'answer' missing or empty", []
    steps = [s.model_dump() for s in obj.reasoning_steps]
    choice = answer_is_a_choice(q, a)
    if answer_in_question(q, a) and not choice:
        return "answer_in_question", []
    span = None if choice else answer_span_in_question(q, a)
    if span is not None:
        return f"answer_in_question: the span {span!r} of the answer is in the question", []
    if explanation_question(q):
        return "explanation_question: the question asks for a reason or an explanation", []
    if explanation_answer(a):
        return "explanation_answer: the answer explains instead of naming an entity or value", []
    if sentence_count(a) > 1:
        return "answer_too_long: more than one sentence", []
    if len(a.split()) > cfg.max_answer_words:
        return f"answer_too_long: {len(a.split())} words > {cfg.max_answer_words}", []
    grounding = ground_steps(steps, docs or [], cfg.evidence_match)
    hops = grounded_hops(grounding)
    if hops < cfg.min_hops:
        generic = sum(1 for g in grounding if g.get("generic"))
        note = f"; {generic} step(s) quoted only a generic phrase" if generic else ""
        return (f"too_few_hops: {hops} grounded hop(s) (distinct path documents quoted with containment "
                f">= {cfg.evidence_match} and >= {MIN_CONTENT_WORDS} content words) < {cfg.min_hops}; "
                f"the model claimed {len(steps)}{note}"), grounding
    return None, grounding


def _cut_off(raw: str) -> bool:
    """The output ends inside its JSON object (cut off at ``max_tokens``). ``call_json`` says so
    itself when nothing parses; the tolerant parser may still find an inner object, which then
    fails validation, so the cut is named here."""
    start = raw.find("{")
    if start < 0:
        return False
    try:
        json.loads(raw[start:])
    except json.JSONDecodeError as exc:
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(raw[start:].rstrip())
    return False


def synthesize_qa(llm: LLM, path: PathRecord, nodes: list[TreeNode], cfg: QAConfig,
                  seed: int = 0) -> QARecord:
    """One QA record for ``path``: accepted, or rejected with the reason (output that is not a
    valid :class:`QAPair`, or a request over the context window, included). Every other LLM
    failure raises (an outage leaves the path unfinished; a 401/404 stops the run)."""
    start = time.monotonic()
    messages = [Message(role="system", content=SYSTEM),
                Message(role="user", content=render_for_qa(path.seed, nodes) +
                        "\n\nWrite the question-answer pair as JSON.")]
    obj, prov, err = call_json(llm, messages, QAPair, name="qa_pair", stage="qa",
                               max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=seed)
    grounding: list[dict[str, Any]] = []
    if err is not None and err.startswith("parse_error") and _cut_off(prov.raw_output or ""):
        err = f"parse_error: output cut off at max_tokens={cfg.max_tokens} before the JSON object closed"
    reason = err
    if err is None:
        reason, grounding = check_qa(obj, cfg, [d for n in nodes for d in n.docs])
    if err is not None and err.startswith("parse_error"):
        reason = f"schema_failure: {err}"
    return QARecord(
        id=f"{path.id}-qa", path_id=path.id, seed_id=path.seed_id,
        status="rejected" if reason else "accepted", reason=reason,
        question=obj.question.strip() if obj else "", answer=obj.answer.strip() if obj else "",
        reasoning_steps=[s.model_dump() for s in obj.reasoning_steps] if obj else [],
        negative_aspect=[s.model_dump() for s in obj.negative_aspect] if obj else [],
        grounding=grounding,
        elapsed=time.monotonic() - start, provenance=prov)


__all__ = ["QAPair", "ReasoningStep", "NegativeAspect", "render_for_qa", "check_qa", "answer_in_question", "answer_is_a_choice", "sentence_count", "synthesize_qa"]
