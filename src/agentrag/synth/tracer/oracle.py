"""The builder's LLM calls: JSON generation, short answers with / without documents, and grading.

One :class:`Oracle` is made per work item and counts the calls it makes (generator and judge), so
every stage record carries its cost. Grading follows §3.2/§3.3: exact match, or token F1 at or above
``verify.f1_pass``, counts as correct without a judge call; "unknown" or an empty answer is wrong;
anything else goes to the 0/1/2 judge (score >= 1 passes). A model failure (unparsable output)
comes back as an error string — the gate that asked fails with that reason; an outage (retryable
``LLMError``) propagates so the item stays unfinished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrag.errors import LLMError, ParseError
from agentrag.eval.judge import JUDGE_SCHEMA, LLMJudge, parse_verdict
from agentrag.eval.metrics import em, f1, normalize_answer
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_json
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.prompts import (
    ANSWER_CLOSED_SYSTEM,
    ANSWER_DOCS_SYSTEM,
    ANSWER_SCHEMA,
    doc_block,
)
from agentrag.synth.tracer.schema import Check

NO_ANSWER = frozenset({"", "unknown", "none", "not mentioned", "no answer"})


@dataclass
class Grade:
    """Whether an answer is correct, with the evidence (``error`` set when grading failed)."""

    correct: bool | None
    em: float = 0.0
    f1: float = 0.0
    judge_score: int | None = None
    raw: list[str] = field(default_factory=list)
    error: str | None = None


class Oracle:
    """LLM calls of one work item (see the module docstring); ``calls`` counts what it paid for."""

    def __init__(self, llm: LLM, judge: LLM | None, cfg: TracerConfig):
        self.llm, self.judge_llm, self.cfg = llm, judge or llm, cfg
        self.calls = 0

    def json(self, system: str, user: str, schema: dict[str, Any], *, name: str, stage: str, max_tokens: int,
             temperature: float = 0.0) -> tuple[dict[str, Any] | None, Provenance, str | None]:
        msgs = [Message(role="system", content=system), Message(role="user", content=user)]
        self.calls += 1
        return call_json(self.llm, msgs, schema, name=name, stage=stage, raise_retryable=True,
                         max_tokens=max_tokens, temperature=temperature)

    def answer(self, question: str, docs: list[tuple[str, str]] | None) -> tuple[str | None, str, str | None]:
        """A short answer, closed-book when ``docs`` is None; returns (answer, raw output, error)."""
        if docs is None:
            system, user = ANSWER_CLOSED_SYSTEM, f"Question: {question}"
        else:
            system = ANSWER_DOCS_SYSTEM
            user = f"Documents:\n{doc_block(docs, self.cfg.atomic.max_doc_chars)}\n\nQuestion: {question}"
        obj, prov, err = self.json(system, user, ANSWER_SCHEMA, name="answer", stage="answer",
                                   max_tokens=self.cfg.verify.max_answer_tokens)
        raw = prov.raw_output or ""
        if err is not None:
            return None, raw, err
        ans = (obj or {}).get("answer")
        if not isinstance(ans, str):
            return None, raw, "parse_error: no string 'answer' in the output"
        return ans.strip(), raw, None

    def grade(self, question: str, pred: str, golds: list[str]) -> Grade:
        e, f = em(pred, golds), f1(pred, golds)
        if e == 1.0 or f >= self.cfg.verify.f1_pass:
            return Grade(True, e, f)
        if normalize_answer(pred) in NO_ANSWER:
            return Grade(False, e, f)
        judge = LLMJudge(self.judge_llm)
        self.calls += 1
        try:
            out = self.judge_llm.chat(judge.messages(question, pred, golds), temperature=0.0, max_tokens=128,
                                      response_format={"type": "json_schema", "json_schema": {
                                          "name": "judge_verdict", "schema": JUDGE_SCHEMA}})
        except LLMError as exc:
            if exc.is_retryable:
                raise
            return Grade(None, e, f, error=f"judge llm_error: {exc}")
        raw = out[0].text or "" if out else ""
        try:
            score, _ = parse_verdict(raw)
        except ParseError as exc:
            return Grade(None, e, f, raw=[raw], error=f"judge parse_error: {exc}")
        return Grade(score >= 1, e, f, judge_score=score, raw=[raw])

    def check(self, name: str, question: str, docs: list[tuple[str, str]] | None, golds: list[str], *,
              want_correct: bool, fail_reason: str) -> Check:
        """Answer ``question`` (with ``docs``, or closed-book) and pass iff correctness == ``want_correct``."""
        pred, raw, err = self.answer(question, docs)
        if err is not None or pred is None:
            return Check(name=name, passed=False, reason=f"{name}: {err}", raw=[raw])
        g = self.grade(question, pred, golds)
        if g.error is not None or g.correct is None:
            return Check(name=name, passed=False, reason=f"{name}: {g.error}", answer=pred, em=g.em, f1=g.f1,
                         raw=[raw, *g.raw])
        ok = g.correct == want_correct
        return Check(name=name, passed=ok, reason="" if ok else fail_reason, answer=pred, em=g.em, f1=g.f1,
                     judge_score=g.judge_score, raw=[raw, *g.raw])


__all__ = ["Oracle", "Grade", "NO_ANSWER"]
