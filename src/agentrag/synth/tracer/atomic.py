"""§3.2: atomic QA pairs per document and their filters, each rejection recorded with its reason.

Filters, cheapest first: ``malformed`` (empty or non-question text, an over-long answer, the answer
written inside the question; and the released code's ``empty_answer`` (no answer or "unknown"),
``and_or_answer`` (an answer naming two things) and ``document_reference`` ("according to the
passage") rejections), ``numeric_answer`` (an answer of digits and punctuation only, which
would make the next hop's retrieval drift), ``parametric`` (answered correctly closed-book, so
retrieval is not needed) and ``not_grounded`` (not answered correctly *with* the document).
"""

from __future__ import annotations

import re
import time

from agentrag.eval.metrics import normalize_answer
from agentrag.synth.tracer.oracle import Oracle, is_no_answer
from agentrag.synth.tracer.outputs import AtomicPairs
from agentrag.synth.tracer.prompts import ATOMIC_SYSTEM
from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, Check, DocRecord

_NUMERIC = re.compile(r"^[\d\s.,:;/%+\-–()]+$")
_DOC_REF = re.compile(r"\b(according to|in|from|mentioned in|described in|given in)\s+the\s+"
                      r"(document|passage|text|article|paragraph)s?\b|\b(this|the given) "
                      r"(document|passage|text|article)\b", re.IGNORECASE)
_AND_OR = re.compile(r"\s(and|or)\s|/|&", re.IGNORECASE)


def answer_heuristic(question: str, answer: str) -> str | None:
    """The released code's wording and answer checks: no and/or answers, no document-referring wording."""
    if _AND_OR.search(f" {answer.strip()} "):
        return f"and_or_answer: {answer!r} names two things"
    if _DOC_REF.search(question):
        return "document_reference: the question refers to a document or passage"
    return None


def is_numeric_only(answer: str) -> bool:
    return bool(_NUMERIC.match(answer.strip()))


def malformed_reason(question: str, answer: str, max_answer_words: int) -> str | None:
    """Why a (question, answer) pair is malformed, or None."""
    q, a = question.strip(), answer.strip()
    if not q or not a:
        return "malformed: empty question or answer"
    if is_no_answer(a):
        return f"empty_answer: {a!r} is no answer"
    if not q.endswith("?") or len(q.split()) < 4:
        return "malformed: not a question"
    bad = answer_heuristic(q, a)
    if bad:
        return bad
    if len(a.split()) > max_answer_words:
        return f"malformed: answer longer than {max_answer_words} words"
    na = normalize_answer(a)
    if na and f" {na} " in f" {normalize_answer(q)} ":
        return "malformed: the answer appears in the question"
    return None


def filter_pair(oracle: Oracle, pair: AtomicPair, doc: tuple[str, str]) -> AtomicPair:
    """Run the §3.2 filters on ``pair`` (grounded in ``doc`` = (title, text)); returns it decided."""
    checks: list[Check] = []

    def done(reason: str | None) -> AtomicPair:
        return pair.model_copy(update={"status": "rejected" if reason else "accepted", "reason": reason,
                                       "checks": checks})

    bad = malformed_reason(pair.question, pair.answer, oracle.cfg.atomic.max_answer_words)
    checks.append(Check(name="malformed", passed=bad is None, reason=bad or ""))
    if bad:
        return done(bad)
    numeric = is_numeric_only(pair.answer)
    checks.append(Check(name="numeric_answer", passed=not numeric,
                        reason="numeric_answer: the answer is only numbers" if numeric else ""))
    if numeric:
        return done(checks[-1].reason)
    for check in (
        lambda: oracle.check("parametric", pair.question, None, pair.golds, want_correct=False,
                             fail_reason="parametric: answered correctly without the document"),
        lambda: oracle.check("grounded", pair.question, [doc], pair.golds, want_correct=True,
                             fail_reason="not_grounded: not answered correctly with the document"),
    ):
        checks.append(check())
        if not checks[-1].passed:
            return done(checks[-1].reason)
    return done(None)


def atomic_qa(oracle: Oracle, doc: DocRecord) -> AtomicRecord:
    """Write up to ``atomic.pairs_per_doc`` pairs for ``doc`` and filter each (§3.2)."""
    start = time.monotonic()
    cfg = oracle.cfg.atomic
    user = (f"Write up to {cfg.pairs_per_doc} question-answer pairs.\n\nTitle: {doc.title}\n"
            f"Passage: {doc.text[:cfg.max_doc_chars]}")
    obj, prov, err = oracle.json(ATOMIC_SYSTEM, user, AtomicPairs, name="atomic_qa", stage="atomic",
                                 max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    rec_id = f"{doc.id}-atomic"
    if err is not None or obj is None:
        return AtomicRecord(id=rec_id, doc_id=doc.id, status="failed", provenance=prov, calls=oracle.calls,
                            reason=err or "parse_error: no output", elapsed=time.monotonic() - start)
    pairs: list[AtomicPair] = []
    seen: set[str] = set()
    for i, raw in enumerate(obj.pairs[:cfg.pairs_per_doc]):
        q, a = raw.question, raw.answer
        pair = AtomicPair(id=f"{doc.id}-q{i}", question=q, answer=a, aliases=raw.clean_aliases())
        if normalize_answer(q) in seen:
            pairs.append(pair.model_copy(update={"reason": "malformed: duplicate question", "checks": [
                Check(name="malformed", passed=False, reason="malformed: duplicate question")]}))
            continue
        seen.add(normalize_answer(q))
        pairs.append(filter_pair(oracle, pair, (doc.title, doc.text)))
    return AtomicRecord(id=rec_id, doc_id=doc.id, pairs=pairs, provenance=prov, calls=oracle.calls,
                        elapsed=time.monotonic() - start)


__all__ = ["answer_heuristic", "atomic_qa", "filter_pair", "malformed_reason", "is_numeric_only"]
