"""RAGShaper's gates in the benchmark: each ``decide`` calls the synthesizer's own gate functions
(:mod:`agentrag.synth.ragshaper.qa`, :mod:`agentrag.synth.ragshaper.distractors`), which compose
the shared checks; a case's evidence becomes the path's main-KB documents, its distractors K~
documents."""

from __future__ import annotations

from typing import Any

from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES, QAConfig
from agentrag.synth.ragshaper.distractors import check_distractor
from agentrag.synth.ragshaper.qa import (
    answer_problem,
    dependence_problem,
    leak_problem,
    question_type_problem,
)
from agentrag.synth.ragshaper.schema import DocRef
from gatebench.cases import Case, Gate


def _docs(c: Case) -> list[DocRef]:
    return ([DocRef(id=f"e{i}", text=t) for i, t in enumerate(c.evidence)]
            + [DocRef(id=f"k{i}", text=t, kb="distractor", distractor_type="doppelganger")
               for i, t in enumerate(c.distractors)])


def _answer(c: Case, v: Any) -> bool:
    return answer_problem(c.question, c.answer, _docs(c), cut=c.cut, aliases=c.aliases, verifier=v) is None


def _leak(c: Case, v: Any) -> bool:
    return leak_problem(c.text, c.answer) is None  # the text under test is the synthesized question


def _question(c: Case, v: Any) -> bool:
    return question_type_problem(c.question, c.answer, QAConfig()) is None


def _dependent(c: Case, v: Any) -> bool:
    docs = _docs(c)
    return dependence_problem(c.question, c.answer, docs, docs, min(3, len(docs)), verifier=v) is None


def _distractor(c: Case, v: Any) -> bool:
    # a case may declare the distractor's type (``entities``); the source document is ``other``
    kind = c.entities[0] if c.entities and c.entities[0] in DISTRACTOR_TYPES else "doppelganger"
    return check_distractor(c.text, c.other, kind, verifier=v) is None


GATES = [
    Gate("ragshaper", "qa_answer", ("support",), _answer),
    Gate("ragshaper", "qa_leakage", ("leakage",), _leak),
    Gate("ragshaper", "qa_question_type", ("question", "answer_form"), _question),
    Gate("ragshaper", "qa_dependent_hops", ("single_document",), _dependent),
    Gate("ragshaper", "distractor", ("distractor", "distractor_type"), _distractor),
]

__all__ = ["GATES"]
