"""§3.3: the three-stage verification of a composed question, every stage kept as a :class:`Check`.

1. ``structural`` (rules over the matching core, :mod:`agentrag.match`; the verifier LLM only where
   strings cannot decide): a question; a non-empty answer (``empty_answer``: the core's no-answer
   vocabulary); the released code's heuristics (``document_reference``; ``and_or_answer``: an answer
   joining parts with "and"/"or"/"&"/"/" that no document writes as one name, and — verifier,
   ``verifier: one_answer`` — one that a document writes so but that names several things;
   ``repeated_answer``: an inference step's answer is an earlier answer, a bridge entity, in
   another written form, and — verifier, ``verifier: bridge_restated`` — one whose name contains
   the earlier one's or the reverse; ``year_dropped``: a year of the sub-questions is lost); no
   *leakage* (an earlier hop's atomic answer, any of its aliases or a distinctive part of its name,
   or for an inference step the previous hop's answer or the final answer, written into the
   question in any form the core reads: case, hyphen, possessive, abbreviation ...); an inference
   step's composed answer is the new atomic answer or one of its aliases (``inference_answer``);
   no *trivial concatenation* (sub-questions joined by "and", ";" or two question marks: a
   question-shape rule, :func:`agentrag.synth.gates.joined_questions`); the link is *bridged* (an
   inference step's atomic question names the previous answer; the composed question keeps content
   of the previous question; a comparison's answer is one of the named options or yes/no).
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

from collections.abc import Sequence
from functools import partial
from typing import Any

from agentrag.match import (
    FUNCTION_WORDS,
    analyse,
    equivalent,
    find_mention,
    is_no_answer,
    mentions,
    tokens,
    yes_no,
)
from agentrag.synth.gates import joined_questions, leakage
from agentrag.synth.tracer.atomic import answer_heuristic, one_answer_problem
from agentrag.synth.tracer.oracle import Oracle, real_golds
from agentrag.synth.tracer.outputs import AuditVerdict
from agentrag.synth.tracer.prompts import AUDIT_SYSTEM
from agentrag.synth.tracer.schema import Check, Hop
from agentrag.synth.verifier import verify as ask_verifier
from agentrag.threads import parallel_calls

STAGES = ("structural", "semantic", "solvability", "necessity", "irreducibility")


def _content(text: str) -> set[str]:
    """The canonical stems of ``text``'s words that are not function words."""
    return {t.stem for t in analyse(text) if t.canon not in FUNCTION_WORDS}


def _years(text: str) -> set[str]:
    """The years (1000-2099) ``text`` states, in any written form the core reads ("1857", "March 5, 1990")."""
    return {t for t in tokens(text) if len(t) == 4 and t.isdigit() and 1000 <= int(t) <= 2099}


def leaked(question: str, golds: Sequence[str], context: str) -> str | None:
    """Which of an earlier answer's names (``golds``: answer + aliases) the question writes, in any
    written form or as a distinctive part of a multi-word name (:func:`agentrag.synth.gates.leakage`);
    names and parts that ``context`` (the earlier composed questions) already writes are given."""
    names = real_golds([g for g in golds if g.strip()])
    if not names or leakage(names[0], question, question=context, aliases=names[1:]) is None:
        return None
    found = find_mention(names[0], question, names[1:], partial=True) or names[0]
    if found.startswith("part:"):
        part = found[5:]
        whole = next((g for g in names if part in tokens(g)), names[0])
        return f"{part!r} (part of {whole!r})"
    return repr(found)


def restated_bridge(prev: Sequence[Hop], cand: Hop, evidence: Sequence[str], verifier: Any = None,
                    asked: list[str] | None = None) -> str | None:
    """An inference step whose answer is an earlier answer (a bridge entity) again: in another
    written form (:func:`agentrag.match.equivalent`: case, possessive, hyphen, abbreviation, alias
    ...) it is rejected; when one name contains the other or a distinctive part of it ("Arminius",
    "Arminius Prize" / "Jacobus Arminius") the verifier decides whether they name one entity
    (without one, such an answer is kept)."""
    answers = [g for g in dict.fromkeys([*cand.atomic_golds, *cand.golds]) if g.strip() and yes_no(g) is None]
    for h in prev:
        bridges = real_golds(list(dict.fromkeys([*h.atomic_golds, *h.golds])))
        if not bridges:
            continue
        for a in answers:
            if equivalent(a, bridges[0], bridges[1:]):
                return f"repeated_answer: {cand.atomic_answer!r} already answers an earlier hop ({h.answer!r}, hop {h.level})"
        for a in answers:
            b = next((b for b in bridges if mentions(a, b) or mentions(b, a, partial=True)), None)
            if b is None:
                continue
            if verifier is None:
                return None
            if asked is not None:
                asked.append("bridge_restated")
            keep, verdict, _ = ask_verifier(verifier, "bridge_restated", list(evidence), stage="structural", a=a, b=b)
            if not keep:
                return f"verifier: bridge_restated: {a!r} names the earlier answer {b!r} again ({verdict.reason})"
    return None


def structural(prev: Sequence[Hop], cand: Hop, verifier: Any = None) -> Check:
    """Stage 1 (see the module docstring); ``verifier`` (an LLM) decides what strings cannot: an
    answer joining names with "and"/"&"/"/" that a document writes as one name, and an answer
    whose name contains an earlier answer's (or the reverse)."""
    q, last = cand.question.strip(), prev[-1]
    docs = [h.doc_text for h in [*prev, cand]]

    asked: list[str] = []  # the verifier's checks asked (counted in the report)

    def fail(reason: str) -> Check:
        return Check(name="structural", passed=False, reason=f"structural: {reason}",
                     details={"verifier": asked} if asked else {})

    if not q.endswith("?") or len(q.split()) < 5:
        return fail("malformed: not a well-formed question")
    if is_no_answer(cand.answer) or not real_golds(cand.golds):
        return fail(f"empty_answer: the composed answer {cand.answer!r} is empty or no answer")
    bad = answer_heuristic(q, cand.answer) or one_answer_problem(cand.answer, [*docs, q], question=q,
                                                                verifier=verifier, stage="structural", asked=asked)
    if bad:
        return fail(bad)
    if cand.template == "inference":
        bad = restated_bridge(prev, cand, docs, verifier, asked)
        if bad:
            return fail(bad)
    years = _years(last.question) | _years(cand.atomic_question)
    years -= _years(" ".join([cand.atomic_answer, *[h.atomic_answer for h in prev]]))
    lost = sorted(years - _years(q))
    if lost:
        return fail(f"year_dropped: the year(s) {', '.join(lost)} of the sub-questions are not in the question")
    context = " ".join(h.question for h in prev)
    for h in [*prev, cand] if cand.template == "comparison" else prev:
        what = leaked(q, h.atomic_golds, context)
        if what:
            return fail(f"leakage: the intermediate answer {what} (hop {h.level}) is in the question")
    if cand.template == "inference":
        if last.template != "comparison":
            what = leaked(q, last.golds, context)
            if what:
                return fail(f"leakage: the previous answer {what} is in the question")
        what = leaked(q, cand.golds, context)
        if what:
            return fail(f"leakage: the final answer {what} is in the question")
        if not equivalent(cand.answer, cand.atomic_answer, cand.atomic_aliases):
            return fail(f"inference_answer: the composed answer {cand.answer!r} is not the new atomic answer "
                        f"{cand.atomic_answer!r} or one of its aliases")
        if not (mentions(last.answer, cand.atomic_question, real_golds(last.aliases))
                or _content(last.answer) <= _content(cand.atomic_question)):
            return fail(f"not_bridged: the new atomic question does not name the previous answer {last.answer!r}")
    else:
        if yes_no(cand.answer) is None and not mentions(cand.answer, q, real_golds(cand.aliases)):
            return fail("comparison_answer: neither yes/no nor one of the entities named in the question")
    joined = joined_questions(q)
    if joined:
        return fail(f"trivial_concatenation: sub-questions joined without integration ({joined})")
    prev_terms = _content(last.question) - _content(last.answer)
    if prev_terms and len(prev_terms & _content(q)) / len(prev_terms) < 0.3:
        return fail("not_bridged: the question drops the content of the previous hop's question")
    return Check(name="structural", passed=True, details={"verifier": asked} if asked else {})


def semantic(oracle: Oracle, prev: Sequence[Hop], cand: Hop) -> Check:
    """Stage 2: the LLM auditor, shown every hop's fact *and its document* (so a link between
    namesakes, which only the documents reveal, can be caught)."""
    facts = "\n\n".join(f"Fact {h.level}: Q: {h.atomic_question} A: {h.atomic_answer}\n"
                         f"Document {h.level} ({h.doc_title}): {oracle.view(h.doc_text, h.atomic_golds)}"
                         for h in [*prev, cand])
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
    """Stage 3 (ii): one answer per removed supporting document (``docs``: (id, title, text as shown)).

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
    docs = [(h.doc_id, h.doc_title, oracle.view(h.doc_text, h.atomic_golds)) for h in [*prev, cand]]
    golds = cand.golds
    steps = [
        lambda: structural(prev, cand, oracle.verifier),
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


__all__ = ["STAGES", "structural", "semantic", "irreducibility", "verify", "leaked", "restated_bridge"]
