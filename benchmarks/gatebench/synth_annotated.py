"""The annotated teacher's gates in the gate benchmark: each ``decide`` builds the searched hops of
a case and runs :mod:`agentrag.synth.annotated.gates` on them (a hop's support in what the agent
is shown, leakage in a query, repeated hops, both sides of a comparison)."""

from __future__ import annotations

from typing import Any

from agentrag.records import Hit
from agentrag.synth.annotated.gates import distinct_gate, grounded_gate, leakage_gate, support_gate
from agentrag.synth.annotated.teacher import Hop, SearchedHop
from gatebench.cases import Case, Gate


def _hit(i: int, doc: str) -> Hit:
    title, _, text = doc.partition("\n")
    return Hit(id=str(i), title=title if text else f"doc {i}", text=text or doc, score=1.0)


def _support(c: Case, v: Any) -> bool:
    hits = [_hit(i, d) for i, d in enumerate(c.evidence + c.distractors)]
    support = [h.title for h in hits[:len(c.evidence)]]
    sh = SearchedHop(Hop(c.question, c.answer, support), "", hits)
    # the case cuts "title\ntext"; the agent is shown the title and the text cut
    cut = None if c.cut is None else max(1, c.cut - len(hits[0].title) - 1)
    return support_gate([sh], cut, v) is None


def _leakage(c: Case, v: Any) -> bool:
    return leakage_gate(c.question, c.answer, [SearchedHop(Hop(c.text, "", []), "", [])]) is None


def _hops(c: Case, v: Any) -> bool:
    return distinct_gate([SearchedHop(Hop(q, "", []), "", []) for q in c.queries]) is None


def _comparison(c: Case, v: Any) -> bool:
    hops = [SearchedHop(Hop(q, "", list(c.entities)), "", []) for q in c.queries]
    return grounded_gate(c.question, c.answer, hops) is None or not c.entities


GATES = [
    Gate("annotated", "support_retrieved", ("support",), _support),
    Gate("annotated", "no_leakage", ("leakage",), _leakage),
    Gate("annotated", "distinct_hops", ("repeat",), _hops),
    Gate("annotated", "answer_grounded", ("comparison",), _comparison),
]
