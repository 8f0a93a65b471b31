"""§3.3: the three-stage verification of a composed question, every stage kept as a :class:`Check`.

1. ``structural`` (rules, no LLM): a question; a non-empty answer (``empty_answer``); the released
   code's heuristics (``and_or_answer``, ``document_reference``, ``repeated_answer``: an inference
   step's new atomic answer already answers an earlier hop, ``year_dropped``: a year of the sub-questions is lost); no
   *leakage* (an earlier hop's atomic answer, any of its aliases or a partial name of it, or for an
   inference step the previous hop's answer or the final answer, written into the question); an
   inference step's composed answer is the new atomic answer or one of its aliases
   (``inference_answer``); no *trivial concatenation* (sub-questions joined by "and", ";" or two
   question marks); the link is *bridged* (an inference step's atomic question names the previous
   answer; the composed question keeps content of the previous question; a comparison's answer is
   one of the named options or yes/no).
2. ``semantic``: an LLM auditor, shown each hop's document, names the rubric item a bad question
   breaks (``false_entity_link``, ``trivial_concatenation``, ``no_common_basis``,
   ``answer_not_supported``, ``other``); the name is the reason in the funnel.
3. ``solvability`` (answered correctly with all supporting documents), ``necessity`` (not answered
   closed-book) and ``irreducibility`` (with each single supporting document removed, not answered:
   one answer call per removed document, all of them made so the verdict lists every culprit).

Stages run cheapest first and stop at the first failure; stages not reached are recorded with
``passed=None``. An unparsable output fails the stage that asked, with the parse error as reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial

from agentrag.eval.metrics import normalize_answer
from agentrag.synth.tracer.atomic import answer_heuristic
from agentrag.synth.tracer.oracle import Oracle, is_no_answer, real_golds
from agentrag.synth.tracer.outputs import AuditVerdict
from agentrag.synth.tracer.prompts import AUDIT_SYSTEM
from agentrag.synth.tracer.schema import Check, Hop
from agentrag.threads import parallel_calls

STAGES = ("structural", "semantic", "solvability", "necessity", "irreducibility")
_WH = r"(what|who|whom|whose|which|where|when|how|why|is|was|are|were|did|does|do)"
_CONCAT = re.compile(rf"(\b(and|also|as well as)\b,?\s+(\w+\s+){{0,1}}{_WH}\b)|;", re.IGNORECASE)
_STOP = frozenset("a an the of in on at to for by with from and or is was are were did does do what who whom "
                  "which where when how why that this its his her their as be been".split())
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b")
def _contains(text: str, phrase: str) -> bool:
    p = normalize_answer(phrase)
    return bool(p) and f" {p} " in f" {normalize_answer(text)} "


def _content(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOP}


def _capitalised(text: str, skip_first: bool = False) -> set[str]:
    """Normalised words written with a capital letter (names and their parts)."""
    words = re.findall(r"[\w'’-]+", text)
    out = {normalize_answer(w) for w in words[1 if skip_first else 0:] if w[:1].isupper()}
    return {w for w in out if len(w) >= 3 and w not in _STOP}


def leaked(question: str, golds: Sequence[str], allowed: set[str]) -> str | None:
    """Which of an earlier answer's names (``golds``: answer + aliases) the question writes: a whole
    name, or a partial name (a capitalised word of a name, capitalised in the question too, not
    among ``allowed``: the words of the earlier composed questions)."""
    for g in golds:
        if _contains(question, g):
            return repr(g)
    named = _capitalised(question, skip_first=True) - allowed
    for g in golds:
        part = sorted(_capitalised(g) & named)
        if part:
            return f"{part[0]!r} (part of {g!r})"
    return None


def structural(prev: Sequence[Hop], cand: Hop) -> Check:
    """Stage 1 (see the module docstring)."""
    q, last = cand.question.strip(), prev[-1]

    def fail(reason: str) -> Check:
        return Check(name="structural", passed=False, reason=f"structural: {reason}")

    if not q.endswith("?") or len(q.split()) < 5:
        return fail("malformed: not a well-formed question")
    if is_no_answer(cand.answer) or not real_golds(cand.golds):
        return fail(f"empty_answer: the composed answer {cand.answer!r} is empty or no answer")
    bad = answer_heuristic(q, cand.answer)
    if bad:
        return fail(bad)
    earlier = {normalize_answer(g) for h in prev for g in h.atomic_golds}
    if cand.template == "inference" and normalize_answer(cand.atomic_answer) in earlier:
        return fail(f"repeated_answer: {cand.atomic_answer!r} already answers an earlier hop")
    years = set(_YEAR.findall(last.question)) | set(_YEAR.findall(cand.atomic_question))
    years -= set(_YEAR.findall(" ".join([cand.atomic_answer, *[h.atomic_answer for h in prev]])))
    lost = sorted(years - set(_YEAR.findall(q)))
    if lost:
        return fail(f"year_dropped: the year(s) {', '.join(lost)} of the sub-questions are not in the question")
    allowed = {w for h in prev for w in _capitalised(h.question)}
    for h in [*prev, cand] if cand.template == "comparison" else prev:
        what = leaked(q, h.atomic_golds, allowed)
        if what:
            return fail(f"leakage: the intermediate answer {what} (hop {h.level}) is in the question")
    if cand.template == "inference":
        if last.template != "comparison":
            what = leaked(q, last.golds, allowed)
            if what:
                return fail(f"leakage: the previous answer {what} is in the question")
        if _contains(q, cand.answer):
            return fail("leakage: the final answer is in the question")
        if normalize_answer(cand.answer) not in {normalize_answer(g) for g in cand.atomic_golds}:
            return fail(f"inference_answer: the composed answer {cand.answer!r} is not the new atomic answer "
                        f"{cand.atomic_answer!r} or one of its aliases")
        if not (_contains(cand.atomic_question, last.answer)
                or _content(last.answer) <= _content(cand.atomic_question)):
            return fail(f"not_bridged: the new atomic question does not name the previous answer {last.answer!r}")
    else:
        ans = normalize_answer(cand.answer)
        if ans not in ("yes", "no") and not _contains(q, cand.answer):
            return fail("comparison_answer: neither yes/no nor one of the entities named in the question")
    if q.count("?") > 1 or _CONCAT.search(q):
        return fail("trivial_concatenation: sub-questions joined without integration")
    prev_terms = _content(last.question) - _content(last.answer)
    if prev_terms and len(prev_terms & _content(q)) / len(prev_terms) < 0.3:
        return fail("not_bridged: the question drops the content of the previous hop's question")
    return Check(name="structural", passed=True)


def semantic(oracle: Oracle, prev: Sequence[Hop], cand: Hop) -> Check:
    """Stage 2: the LLM auditor, shown every hop's fact *and its document* (so a link between
    namesakes, which only the documents reveal, can be caught)."""
    cut = oracle.cfg.atomic.max_doc_chars
    facts = "\n\n".join(f"Fact {h.level}: Q: {h.atomic_question} A: {h.atomic_answer}\n"
                         f"Document {h.level} ({h.doc_title}): {h.doc_text[:cut]}" for h in [*prev, cand])
    user = (f"Template of the last step: {cand.template}\n{facts}\n\n"
            f"Previous question: {prev[-1].question} (answer: {prev[-1].answer})\n"
            f"Composed question: {cand.question}\nFinal answer: {cand.answer}")
    verdict, prov, err = oracle.json(AUDIT_SYSTEM, user, AuditVerdict, name="audit", stage="semantic",
                                     max_tokens=oracle.cfg.verify.audit_max_tokens)
    raw = [prov.raw_output or ""]
    if err is not None or verdict is None:
        return Check(name="semantic", passed=False, reason=f"semantic: {err or 'parse_error: no verdict'}", raw=raw)
    valid, reason = verdict.valid and verdict.failure == "none", verdict.reason
    kind = verdict.failure if verdict.failure != "none" else "other"
    return Check(name="semantic", passed=valid, reason="" if valid else f"semantic: {kind}: {reason}",
                 raw=raw, details={"auditor_reason": reason, "failure": verdict.failure})


def irreducibility(oracle: Oracle, question: str, docs: Sequence[tuple[str, str, str]], golds: list[str]) -> Check:
    """Stage 3 (ii): one answer per removed supporting document (``docs``: (id, title, text)).

    The answers are independent, so they are asked at once (:func:`agentrag.threads.parallel_calls`;
    the LLM backend's request limit still bounds what reaches the server); results are read in
    document order, and an outage in any of them propagates as it did when they ran one after another."""
    culprits: list[str] = []
    raw: list[str] = []
    per_doc: dict[str, dict[str, object]] = {}

    def without(i: int) -> Check:
        rest = [(t, x) for j, (_, t, x) in enumerate(docs) if j != i]
        return oracle.check("irreducibility", question, rest, golds, want_correct=False,
                            fail_reason=f"still answerable without {docs[i][0]}")

    checks = parallel_calls([partial(without, i) for i in range(len(docs))], name="tracer-irreducibility")
    for (did, _, _), c in zip(docs, checks, strict=True):
        raw.extend(c.raw)
        per_doc[did] = {"answer": c.answer, "passed": c.passed, "reason": c.reason}
        if not c.passed:
            culprits.append(did)
    if culprits:
        return Check(name="irreducibility", passed=False, raw=raw, details={"removed": per_doc},
                     reason=f"irreducibility: answerable (or unparsable) with a supporting document removed: "
                            f"{', '.join(culprits)}")
    return Check(name="irreducibility", passed=True, raw=raw, details={"removed": per_doc})


def verify(oracle: Oracle, prev: Sequence[Hop], cand: Hop) -> Hop:
    """All three stages over ``cand`` (the new last hop of a chain whose earlier hops are ``prev``)."""
    docs = [(h.doc_id, h.doc_title, h.doc_text) for h in [*prev, cand]]
    golds = cand.golds
    steps = [
        lambda: structural(prev, cand),
        lambda: semantic(oracle, prev, cand),
        lambda: oracle.check("solvability", cand.question, [(t, x) for _, t, x in docs], golds, want_correct=True,
                             fail_reason="solvability: not answered correctly with all supporting documents"),
        lambda: oracle.check("necessity", cand.question, None, golds, want_correct=False,
                             fail_reason="necessity: answered correctly without documents"),
        lambda: irreducibility(oracle, cand.question, docs, golds),
    ]
    checks = list(cand.checks)
    reason: str | None = None
    for name, step in zip(STAGES, steps, strict=True):
        if reason is not None:
            checks.append(Check(name=name, passed=None, reason="not run: an earlier stage failed"))
            continue
        c = step()
        checks.append(c)
        if not c.passed:
            reason = c.reason or f"{name} failed"
    return cand.model_copy(update={"checks": checks, "verified": reason is None, "reason": reason})


__all__ = ["STAGES", "structural", "semantic", "irreducibility", "verify"]
