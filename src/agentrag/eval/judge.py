"""LLM-as-a-judge on AgenticRAGTracer's 0/1/2 equivalence scale (pass at >= 1).

The judge sees the question, the gold answer(s) and the prediction and returns JSON
``{"reason": str, "score": 0|1|2}`` under a JSON-schema ``response_format``, at temperature 0
(Tracer §4.1: GPT-4o-mini at temperature 0). The rubric:

- 2: equivalent: the prediction gives the same key information as a gold answer (wording,
  formatting and aliases aside);
- 1: the prediction includes all the key information of a gold answer and adds extra
  information that does not contradict it;
- 0: anything else: a different or contradicting answer, a key fact missing or stated less
  precisely than the gold (e.g. a year for a full date, a country for a city), a refusal, no answer.

The reply is declared as the pydantic model :class:`JudgeReply` (a bounded reason, a strict
integer score in 0/1/2): it gives the JSON schema sent to the backend and validates the reply. A
score that is not an integer in 0/1/2 (``1.5``, ``1.0``, ``true``, ``3``) is a judge error.

An empty prediction scores 0 without calling the model. Failures follow the failure policy:
an outage of the judge (or an :class:`~agentrag.errors.EndpointError`) propagates, so the item
stays unfinished (its judgement pending) and a rerun judges it; only judge *output* that cannot
be read as a verdict (or a request over the judge's context window) is a verdict with ``error``
set (see :meth:`LLMJudge.assess`): the runner then marks the item ``judge_error`` with no verdict
(never EM in its place); :meth:`LLMJudge.score` raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentrag.errors import ContextLimitError, ParseError
from agentrag.llm.base import LLM
from agentrag.llm.structured import parse_structured, response_format
from agentrag.records import Message

PASS_SCORE = 1

JUDGE_SYSTEM = (
    "You grade answers to questions. Compare a predicted answer with the reference answer(s). "
    "Ignore wording, casing, punctuation, formatting and well-known aliases; judge the information.\n"
    "Scores:\n"
    "2 - equivalent: the prediction gives the same key information as a reference answer, nothing "
    "missing and nothing added.\n"
    "1 - the prediction contains all the key information of a reference answer and also adds extra "
    "information that does not contradict it.\n"
    "0 - otherwise: a different answer, anything that contradicts the reference, a key fact that is "
    "missing or less precise than in the reference (for example only the year of a full date), a "
    "refusal, or no answer.\n"
    'Reply with JSON only: {"reason": "<one sentence>", "score": 0, 1 or 2}.'
)

#: bound on the judge's reason, so schema-constrained decoding always terminates
REASON_MAX_CHARS = 400


class JudgeReply(BaseModel):
    """The judge's structured reply: a one-sentence reason and the 0/1/2 score."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(max_length=REASON_MAX_CHARS)
    score: Literal[0, 1, 2]

    @field_validator("score", mode="before")
    @classmethod
    def _integer(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"score must be the integer 0, 1 or 2, got {value!r}")
        return value


JUDGE_FORMAT: dict[str, Any] = response_format(JudgeReply, "judge_verdict")
#: the JSON schema of :class:`JudgeReply` (kept for callers that build their own response_format)
JUDGE_SCHEMA: dict[str, Any] = JUDGE_FORMAT["json_schema"]["schema"]

_SCORE_RE = re.compile(r'"score"\s*:\s*"?([012])(?![\d.eE])"?')


def _score_value(value: Any) -> int | None:
    """An integer score in 0/1/2 (the JSON integer or the one-digit string); ``None`` for any
    other value: ``1.5``, ``1.0``, ``true``, ``3``, ``-1``, ``null`` are not scores."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1", "2"):
        return int(value.strip())
    return None


class JudgeVerdict(BaseModel):
    """The judge's score (``None`` on failure), its reason, raw output and error."""

    score: int | None = None
    reason: str = ""
    raw: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= PASS_SCORE


def parse_verdict(text: str) -> tuple[int, str]:
    """``(score, reason)`` of the judge's output: a :class:`JudgeReply`, else (a server without
    schema support) the JSON object with an integer 0/1/2 ``score``, else a ``"score": N`` pair;
    raises ParseError when there is none, and when the score is not an integer in 0/1/2
    (``1.5``, ``1.0``, ``true``, ``3``: a judge error, never truncated or rounded)."""
    try:
        reply = parse_structured(text, JudgeReply)
        return reply.score, reply.reason
    except ParseError:
        pass
    obj: Any = None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                obj = json.loads(text[start:end + 1])
            except json.JSONDecodeError:
                obj = None
    if isinstance(obj, dict) and "score" in obj:
        score = _score_value(obj["score"])
        if score is None:
            raise ParseError(f"judge score {obj['score']!r} is not an integer in 0/1/2: {text[:200]!r}")
        return score, str(obj.get("reason", ""))
    m = _SCORE_RE.search(text)
    if m:
        return int(m.group(1)), ""
    raise ParseError(f"judge output has no score in 0/1/2: {text[:200]!r}")


class LLMJudge:
    """Scores predictions against gold answers with an LLM (its own model and config)."""

    def __init__(self, llm: LLM, *, temperature: float = 0.0, max_tokens: int = 256):
        self.llm = llm
        self.temperature = temperature
        self.max_tokens = max_tokens

    def messages(self, question: str, pred: str, golds: Sequence[str]) -> list[Message]:
        refs = "\n".join(f"- {g}" for g in golds)
        user = f"Question: {question}\nReference answer(s):\n{refs}\nPredicted answer: {pred}"
        return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=user)]

    def assess(self, question: str, pred: str | None, golds: Sequence[str]) -> JudgeVerdict:
        """Judge one prediction. Output that is not a verdict (or a request over the judge's
        context window) comes back as a verdict with ``error`` set; an outage or an endpoint error
        of the judge is raised (the item's judgement stays pending; a rerun judges it)."""
        if pred is None or not pred.strip():
            return JudgeVerdict(score=0, reason="no answer")
        try:
            out = self.llm.chat(self.messages(question, pred, golds), response_format=JUDGE_FORMAT,
                                temperature=self.temperature, max_tokens=self.max_tokens)
        except ContextLimitError as exc:
            return JudgeVerdict(error=f"context_limit: {exc}")
        except ParseError as exc:
            if exc.is_retryable:  # not a valid completion: an outage
                raise
            return JudgeVerdict(error=f"parse_error: {exc}")
        raw = out[0].text if out else None
        if not raw:
            return JudgeVerdict(raw=raw, error="judge returned no text")
        try:
            score, reason = parse_verdict(raw)
        except ParseError as exc:
            return JudgeVerdict(raw=raw, error=str(exc))
        return JudgeVerdict(score=score, reason=reason, raw=raw)

    def score(self, question: str, pred: str | None, golds: Sequence[str]) -> int:
        """The 0/1/2 score; raises the judge's outage, or a ParseError when its output is no verdict."""
        verdict = self.assess(question, pred, golds)
        if verdict.score is None:
            raise ParseError(f"LLM judge failed: {verdict.error}")
        return verdict.score


__all__ = ["LLMJudge", "JudgeVerdict", "JudgeReply", "parse_verdict", "PASS_SCORE", "JUDGE_FORMAT", "JUDGE_SCHEMA",
           "REASON_MAX_CHARS"]
