"""Every gate under test, as ``Gate(synth, name, tasks, decide)``: ``decide(case, verifier)`` runs
the real gate code on the case and says whether the item is kept.

``shared`` rows run the shared checks of :mod:`agentrag.synth.gates` directly; each synthesizer's
rows run that synthesizer's own gate functions (which compose the shared checks), so a synthesizer
that bypasses the core shows up here.
"""

from __future__ import annotations

from typing import Any

from agentrag.synth import gates as g
from gatebench.cases import Case, Gate


def _support(c: Case, v: Any) -> bool:
    return g.answer_support(c.answer, c.evidence, question=c.question, aliases=c.aliases, cut=c.cut,
                            distractors=c.distractors, verifier=v) is None


def _leakage(c: Case, v: Any) -> bool:
    return g.leakage(c.answer, c.text, question=c.question, aliases=c.aliases) is None


def _no_answer(c: Case, v: Any) -> bool:
    from agentrag.match import is_no_answer
    return not is_no_answer(c.answer)


def _near_duplicate(c: Case, v: Any) -> bool:
    if c.task == "repeat":
        return g.repeated(c.queries) is None
    from agentrag.match import near_duplicate
    return not near_duplicate(c.text, c.other)


def _thought(c: Case, v: Any) -> bool:
    return g.thought_problem(c.text, c.evidence, question=c.question, answer=c.answer, verifier=v) is None


def _comparison(c: Case, v: Any) -> bool:
    return g.one_sided(c.entities, c.queries) is None


def _single(c: Case, v: Any) -> bool:
    return g.single_document(c.question, c.answer, c.evidence, verifier=v) is None


def _question(c: Case, v: Any) -> bool:
    return g.question_problem(c.question, c.answer) is None


def _distractor(c: Case, v: Any) -> bool:
    return g.distractor_problem(c.text, c.other, answer=c.answer, verifier=v) is None


SHARED_GATES = [
    Gate("shared", "answer_support", ("support",), _support),
    Gate("shared", "leakage", ("leakage",), _leakage),
    Gate("shared", "no_answer", ("no_answer",), _no_answer),
    Gate("shared", "near_duplicate", ("near_duplicate", "repeat"), _near_duplicate),
    Gate("shared", "thought", ("thought",), _thought),
    Gate("shared", "one_sided", ("comparison",), _comparison),
    Gate("shared", "single_document", ("single_document",), _single),
    Gate("shared", "question_type", ("question",), _question),
    Gate("shared", "distractor", ("distractor",), _distractor),
]


def all_gates() -> list[Gate]:
    """Every gate the benchmark scores: the shared checks, then each synthesizer's, from every
    ``gatebench/synth_<name>.py`` module (each defines ``GATES: list[Gate]``)."""
    import importlib
    import pkgutil

    import gatebench

    out = list(SHARED_GATES)
    for mod in sorted(m.name for m in pkgutil.iter_modules(gatebench.__path__) if m.name.startswith("synth_")):
        out.extend(importlib.import_module(f"gatebench.{mod}").GATES)
    return out

__all__ = ["SHARED_GATES", "all_gates"]
