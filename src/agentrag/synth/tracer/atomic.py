"""§3.2: atomic QA pairs per document and their filters, each rejection recorded with its reason.

Filters, cheapest first: ``malformed`` (empty or non-question text, an over-long answer, the answer
written inside the question; and the released code's ``empty_answer`` (no answer: the matching
core's no-answer vocabulary) and ``document_reference`` ("according to the passage") rejections),
``and_or_answer`` (an answer joining two things with "and", "or", "&" or "/": rejected when no
document writes it as one name; a name the document does write so — "Simon & Garfunkel", "AC/DC" —
goes to the verifier, which decides whether it is one answer), ``numeric_answer`` (an answer of
digits and punctuation only, which would make the next hop's retrieval drift), ``parametric``
(answered correctly closed-book, so retrieval is not needed) and ``not_grounded`` (not answered
correctly *with* the document). Every string comparison goes through :mod:`agentrag.match`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from agentrag.match import analyse, is_no_answer, mentions, near_duplicate
from agentrag.synth.gates import document_reference
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.outputs import AtomicPairs
from agentrag.synth.tracer.prompts import ATOMIC_SYSTEM
from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, Check, DocRecord
from agentrag.synth.verifier import verify

#: canonical words that join two answers into one string ("&" is written "and" by the core)
_JOINERS = frozenset({"and", "or"})


def joins_answers(answer: str) -> bool:
    """The answer joins parts with "and", "or", "&" or "/" (it may be one name or two answers)."""
    return "/" in answer or any(t.canon in _JOINERS for t in analyse(answer))


def one_answer_problem(answer: str, evidence: Sequence[str], *, question: str = "", verifier: Any = None,
                       stage: str = "atomic", asked: list[str] | None = None) -> str | None:
    """Why an answer joining parts ("X and Y", "X / Y") is not one answer: no ``evidence`` text
    writes it as one run of words (two things joined by the generator), or — when some does —
    the verifier says it names several things. Names such as "Simon & Garfunkel", "AC/DC" or
    "Bosnia and Herzegovina" written so by a document are kept (without a verifier: lexically)."""
    if not joins_answers(answer):
        return None
    if not any(mentions(answer, e) for e in evidence):
        return f"and_or_answer: {answer!r} names two things (no document writes it as one name)"
    if verifier is None:
        return None
    if asked is not None:
        asked.append("one_answer")
    keep, verdict, _ = verify(verifier, "one_answer", list(evidence), stage=stage, answer=answer, question=question)
    return None if keep else f"verifier: one_answer: {answer!r} names more than one thing ({verdict.reason})"


def answer_heuristic(question: str, answer: str) -> str | None:
    """The released code's wording check: no document-referring wording ("according to the passage")."""
    return document_reference(question)


def is_numeric_only(answer: str) -> bool:
    """Digits and punctuation only ("1857", "1,857", "5%"): a shape of the string, not a match;
    a value with a unit written in letters ("4,586 K", "5 million") is not."""
    a = answer.strip()
    return any(ch.isdigit() for ch in a) and not any(ch.isalpha() for ch in a)


def malformed_reason(question: str, answer: str, max_answer_words: int, aliases: Sequence[str] = ()) -> str | None:
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
    if mentions(a, q, aliases):
        return "malformed: the answer appears in the question"
    return None


def filter_pair(oracle: Oracle, pair: AtomicPair, doc: tuple[str, str]) -> AtomicPair:
    """Run the §3.2 filters on ``pair`` (grounded in ``doc`` = (title, text)); returns it decided."""
    checks: list[Check] = []

    def done(reason: str | None) -> AtomicPair:
        return pair.model_copy(update={"status": "rejected" if reason else "accepted", "reason": reason,
                                       "checks": checks})

    bad = malformed_reason(pair.question, pair.answer, oracle.cfg.atomic.max_answer_words, pair.aliases)
    asked: list[str] = []
    if bad is None:
        bad = one_answer_problem(pair.answer, [doc[1]], question=pair.question, verifier=oracle.verifier,
                                 stage="atomic", asked=asked)
    checks.append(Check(name="malformed", passed=bad is None, reason=bad or "",
                        details={"verifier": asked} if asked else {}))
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
        lambda: oracle.check("grounded", pair.question, [(doc[0], oracle.view(doc[1], pair.golds))], pair.golds,
                             want_correct=True,
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
            f"Passage: {oracle.view(doc.text)}")
    obj, prov, err = oracle.json(ATOMIC_SYSTEM, user, AtomicPairs, name="atomic_qa", stage="atomic",
                                 max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    rec_id = f"{doc.id}-atomic"
    if err is not None or obj is None:
        return AtomicRecord(id=rec_id, doc_id=doc.id, status="failed", provenance=prov, calls=oracle.calls,
                            reason=err or "parse_error: no output", elapsed=time.monotonic() - start)
    pairs: list[AtomicPair] = []
    seen: list[str] = []
    for i, raw in enumerate(obj.pairs[:cfg.pairs_per_doc]):
        q, a = raw.question, raw.answer
        pair = AtomicPair(id=f"{doc.id}-q{i}", question=q, answer=a, aliases=raw.clean_aliases())
        if any(near_duplicate(q, s) for s in seen):
            pairs.append(pair.model_copy(update={"reason": "malformed: duplicate question", "checks": [
                Check(name="malformed", passed=False, reason="malformed: duplicate question")]}))
            continue
        seen.append(q)
        pair = filter_pair(oracle, pair, (doc.title, doc.text))
        removed = raw.no_answer_aliases()
        if removed and pair.checks:  # counted in the report (``no_answer_aliases_removed``)
            pair.checks[0].details["no_answer_aliases_removed"] = removed
        pairs.append(pair)
    return AtomicRecord(id=rec_id, doc_id=doc.id, pairs=pairs, provenance=prov, calls=oracle.calls,
                        cuts=oracle.cuts, elapsed=time.monotonic() - start)


__all__ = ["answer_heuristic", "atomic_qa", "filter_pair", "malformed_reason", "is_numeric_only", "joins_answers",
           "one_answer_problem"]
