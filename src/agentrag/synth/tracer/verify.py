"""§3.3: the three-stage verification of a composed question, every stage kept as a :class:`Check`.

1. ``structural`` (rules, no LLM): a question; no *leakage* (an earlier hop's atomic answer, or for
   an inference step the previous hop's answer or the final answer, written into the question); no
   *trivial concatenation* (two questions joined by "and" or by two question marks); the link is
   *bridged* (an inference step's atomic question names the previous answer; the composed question
   keeps content of the previous question; a comparison's answer is one of the named options or
   yes/no).
2. ``semantic``: an LLM auditor rejects spurious links, conflated namesakes and comparisons
   without a common basis.
3. ``solvability`` (answered correctly with all supporting documents), ``necessity`` (not answered
   closed-book) and ``irreducibility`` (with each single supporting document removed, not answered:
   one answer call per removed document, all of them made so the verdict lists every culprit).

Stages run cheapest first and stop at the first failure; stages not reached are recorded with
``passed=None``. An unparsable output fails the stage that asked, with the parse error as reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentrag.eval.metrics import normalize_answer
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.outputs import AuditVerdict
from agentrag.synth.tracer.prompts import AUDIT_SYSTEM
from agentrag.synth.tracer.schema import Check, Hop

STAGES = ("structural", "semantic", "solvability", "necessity", "irreducibility")
_CONCAT = re.compile(r"\b(and|also)\s+(what|who|whom|which|where|when|how|why|is|was|are|were|did|does|do)\b",
                     re.IGNORECASE)
_STOP = frozenset("a an the of in on at to for by with from and or is was are were did does do what who whom "
                  "which where when how why that this its his her their as be been".split())


def _contains(text: str, phrase: str) -> bool:
    p = normalize_answer(phrase)
    return bool(p) and f" {p} " in f" {normalize_answer(text)} "


def _content(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOP}


def structural(prev: Sequence[Hop], cand: Hop) -> Check:
    """Stage 1 (see the module docstring)."""
    q, last = cand.question.strip(), prev[-1]

    def fail(reason: str) -> Check:
        return Check(name="structural", passed=False, reason=f"structural: {reason}")

    if not q.endswith("?") or len(q.split()) < 5:
        return fail("malformed: not a well-formed question")
    for h in [*prev, cand] if cand.template == "comparison" else prev:
        if _contains(q, h.atomic_answer):
            return fail(f"leakage: the intermediate answer {h.atomic_answer!r} (hop {h.level}) is in the question")
    if cand.template == "inference":
        if _contains(q, last.answer) and last.template != "comparison":
            return fail(f"leakage: the previous answer {last.answer!r} is in the question")
        if _contains(q, cand.answer):
            return fail("leakage: the final answer is in the question")
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
    """Stage 2: the LLM auditor."""
    facts = "\n".join(f"Fact {h.level} (from '{h.doc_title}'): Q: {h.atomic_question} A: {h.atomic_answer}"
                      for h in [*prev, cand])
    user = (f"Template of the last step: {cand.template}\n{facts}\n"
            f"Previous question: {prev[-1].question} (answer: {prev[-1].answer})\n"
            f"Composed question: {cand.question}\nFinal answer: {cand.answer}")
    verdict, prov, err = oracle.json(AUDIT_SYSTEM, user, AuditVerdict, name="audit", stage="semantic",
                                     max_tokens=oracle.cfg.verify.audit_max_tokens)
    raw = [prov.raw_output or ""]
    if err is not None or verdict is None:
        return Check(name="semantic", passed=False, reason=f"semantic: {err or 'parse_error: no verdict'}", raw=raw)
    valid, reason = verdict.valid, verdict.reason
    return Check(name="semantic", passed=valid, reason="" if valid else f"semantic: auditor rejected: {reason}",
                 raw=raw, details={"auditor_reason": reason})


def irreducibility(oracle: Oracle, question: str, docs: Sequence[tuple[str, str, str]], golds: list[str]) -> Check:
    """Stage 3 (ii): one answer per removed supporting document (``docs``: (id, title, text))."""
    culprits: list[str] = []
    raw: list[str] = []
    per_doc: dict[str, dict[str, object]] = {}
    for i, (did, _, _) in enumerate(docs):
        rest = [(t, x) for j, (_, t, x) in enumerate(docs) if j != i]
        c = oracle.check("irreducibility", question, rest, golds, want_correct=False,
                         fail_reason=f"still answerable without {did}")
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
