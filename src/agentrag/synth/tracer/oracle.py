"""The builder's LLM calls: JSON generation, short answers with / without documents, and grading.

One :class:`Oracle` is made per work item and counts the calls it makes (generator and judge), so
every stage record carries its cost. Grading follows §3.2/§3.3: only an exact match (against a
non-empty gold) counts as correct without a judge call; "unknown" or an empty answer is wrong; golds
that are empty or a no-answer phrase never match (an item whose golds are all such is never
correct); anything else goes to the 0/1/2 judge (score >= 1 passes). Sampled calls (temperature >
0) carry a seed derived from the run seed, the work item's id, the call's name and its number
within the item (:func:`call_seed`), so a run is reproducible and a resumed item makes the same
requests as an uninterrupted one. Every call declares its reply as a
pydantic model (:mod:`agentrag.synth.tracer.outputs`). Model output that fails parsing or
validation, or a request over the context window, comes back as an error string: the gate that
asked fails with that reason (a flagged record). Every other LLM failure propagates (the failure
policy): an outage leaves the item unfinished, a 401/404 stops the run.

No-answer strings ("unknown", "N/A", "null", "not stated" ...) are the matching core's one
vocabulary (:func:`agentrag.match.is_no_answer`), for golds, aliases and predictions alike.
Questions of meaning that strings cannot decide go to the verifier LLM (:attr:`Oracle.verifier`,
asked through :mod:`agentrag.synth.verifier`; the generator unless another is given); its calls
are counted with the others. Documents are shown whole unless ``atomic.max_doc_chars`` is set; then a longer
document is cut to a window of that size chosen per hop, around the passage that states the hop's
fact (:meth:`Oracle.view`), and every cut is counted (``cuts``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from agentrag.eval.judge import JudgeReply, LLMJudge
from agentrag.eval.metrics import em, f1
from agentrag.llm.base import LLM
from agentrag.match import is_no_answer, mentions
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_json
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.outputs import ShortAnswer
from agentrag.synth.tracer.prompts import ANSWER_CLOSED_SYSTEM, ANSWER_DOCS_SYSTEM, doc_block
from agentrag.synth.tracer.schema import Check

M = TypeVar("M", bound=BaseModel)

#: characters that end a sentence (where a per-hop window may start)
_SENTENCE_END = ".!?\n"


def real_golds(golds: Sequence[str]) -> list[str]:
    """The golds that can be matched: empty and no-answer golds (the core's vocabulary) dropped."""
    return [g for g in golds if not is_no_answer(g)]


def window(text: str, cut: int, facts: Sequence[str] = ()) -> str:
    """``cut`` characters of ``text``: from its start when the first sentence stating one of
    ``facts`` (the hop's answer and aliases, matched by the core) ends inside them or none does,
    else from the start of that sentence (so the fact is always shown)."""
    if len(text) <= cut:
        return text
    starts = [0] + [i + 1 for i, ch in enumerate(text[:-1]) if ch in _SENTENCE_END and text[i + 1].isspace()]
    forms = [f for f in facts if f and not is_no_answer(f)]
    if forms:
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(text)
            if mentions(forms[0], text[start:end], forms[1:]):
                if end <= cut:
                    break
                begin = min(start + (1 if text[start:start + 1].isspace() else 0), len(text) - cut)
                return text[begin:begin + cut]
    return text[:cut]


class _Counted:
    """An LLM whose chat calls are counted by the oracle (the verifier's calls)."""

    def __init__(self, llm: LLM, paid: Callable[[], None]):
        self._llm, self._paid = llm, paid

    def chat(self, *args: Any, **kwargs: Any) -> Any:
        self._paid()
        return self._llm.chat(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)


def call_seed(run_seed: int, item: str, name: str, index: int) -> int:
    """The seed of the ``index``-th sampled ``name`` call of work item ``item`` (31-bit, stable)."""
    digest = hashlib.sha256(f"{run_seed}\x1f{item}\x1f{name}\x1f{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


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

    def __init__(self, llm: LLM, judge: LLM | None, cfg: TracerConfig, item: str = "", verifier: LLM | None = None):
        self.llm, self.judge_llm, self.cfg, self.item = llm, judge or llm, cfg, item
        self.verifier_llm = verifier or llm
        self.calls = 0
        self.cuts = 0  # documents shown cut (``atomic.max_doc_chars``)
        self._sampled: dict[str, int] = {}
        self._lock = threading.Lock()  # irreducibility asks its answers from several threads

    def _paid(self) -> None:
        with self._lock:
            self.calls += 1

    def seed_for(self, name: str) -> int:
        """The next sampled ``name`` call's seed (see :func:`call_seed`)."""
        index = self._sampled.get(name, 0)
        self._sampled[name] = index + 1
        return call_seed(self.cfg.seed, self.item, name, index)

    def json(self, system: str, user: str, model: type[M], *, name: str, stage: str, max_tokens: int,
             temperature: float = 0.0) -> tuple[M | None, Provenance, str | None]:
        """One structured call: ``(instance or None, provenance, error)`` (see :func:`call_json`)."""
        msgs = [Message(role="system", content=system), Message(role="user", content=user)]
        self._paid()
        extra: dict[str, Any] = {"seed": self.seed_for(f"{stage}.{name}")} if temperature > 0 else {}
        obj, prov, err = call_json(self.llm, msgs, model, name=name, stage=stage, max_tokens=max_tokens,
                                   temperature=temperature, **extra)
        return obj, prov, err

    def view(self, text: str, facts: Sequence[str] = ()) -> str:
        """What an LLM is shown of a document: the whole text, or with ``atomic.max_doc_chars`` set a
        window chosen per hop around the passage stating ``facts`` (:func:`window`), counted in ``cuts``."""
        cut = self.cfg.atomic.max_doc_chars
        if cut is None or len(text) <= cut:
            return text
        with self._lock:
            self.cuts += 1
        return window(text, cut, facts)

    @property
    def verifier(self) -> LLM:
        """The verifier LLM, its calls counted with this item's."""
        return _Counted(self.verifier_llm, self._paid)  # type: ignore[return-value]

    def answer(self, question: str, docs: list[tuple[str, str]] | None) -> tuple[str | None, str, str | None]:
        """A short answer, closed-book when ``docs`` is None (``docs``: (title, text shown), each text
        already chosen by :meth:`view`); returns (answer, raw output, error)."""
        if docs is None:
            system, user = ANSWER_CLOSED_SYSTEM, f"Question: {question}"
        else:
            system = ANSWER_DOCS_SYSTEM
            user = f"Documents:\n{doc_block(docs)}\n\nQuestion: {question}"
        obj, prov, err = self.json(system, user, ShortAnswer, name="answer", stage="answer",
                                   max_tokens=self.cfg.verify.max_answer_tokens)
        raw = prov.raw_output or ""
        if err is not None or obj is None:
            return None, raw, err or "parse_error: no answer"
        return obj.answer, raw, None

    def grade(self, question: str, pred: str, golds: list[str]) -> Grade:
        golds = real_golds(golds)
        if not golds:  # an empty or no-answer gold is never matched
            return Grade(False)
        e, f = em(pred, golds), f1(pred, golds)
        if e == 1.0:
            return Grade(True, e, f)
        if is_no_answer(pred):
            return Grade(False, e, f)
        self._paid()
        verdict, prov, err = call_json(self.judge_llm, LLMJudge(self.judge_llm).messages(question, pred, golds),
                                       JudgeReply, name="judge_verdict", stage="judge", temperature=0.0,
                                       max_tokens=128)
        raw = [prov.raw_output or ""]
        if err is not None or verdict is None:
            return Grade(None, e, f, raw=raw, error=f"judge {err or 'parse_error: no verdict'}")
        return Grade(verdict.score >= 1, e, f, judge_score=verdict.score, raw=raw)

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


__all__ = ["Oracle", "Grade", "is_no_answer", "real_golds", "window", "call_seed"]
