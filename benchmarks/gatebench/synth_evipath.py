"""EviPath's gates in the gate benchmark: each ``decide`` builds the EviPath records of a case and
runs :mod:`agentrag.synth.evipath.gates` on them (the final answer's support, a sub-answer
sentence's support, leakage in the planner's texts, distinct hops, both sides of a comparison,
planner thoughts, self-contained sub-questions)."""

from __future__ import annotations

from typing import Any

from agentrag.records import Provenance
from agentrag.synth.evipath.gates import (
    compared,
    hops_problem,
    leaked,
    planner_thought_problems,
    self_contained_problem,
    sub_answer_unsupported,
)
from agentrag.synth.evipath.schema import EviItem, Fact, IterationRecord, PlanRecord, SelectionRecord
from agentrag.synth.evipath.support import final_answer_unsupported
from agentrag.synth.gates import one_sided, visible
from gatebench.cases import Case, Gate

_PROV = Provenance(stage="gatebench")


def _item(c: Case, titles: list[str] | None = None) -> EviItem:
    facts = [Fact(idx=i, title=t, text=t) for i, t in enumerate(titles or [])]
    return EviItem(id=c.item_id or "x", question=c.question or "?", answer=c.answer or "x",
                   answers=[c.answer, *c.aliases] if c.answer else ["x"], facts=facts, gold=list(range(len(facts))))


def _final_support(c: Case, v: Any) -> bool:
    shown = [visible(e, c.cut) for e in c.evidence]  # the observations hold what the agent was shown
    return final_answer_unsupported(c.answer, shown, c.question, c.aliases, v) is None


def _sub_answer_support(c: Case, v: Any) -> bool:
    sentence = f"The answer to \"{c.question}\" is {c.answer}."
    sel = SelectionRecord(id="s", item_id="x", question=c.question, answer=sentence,
                          supporting=[visible(e, c.cut) for e in c.evidence], provenance=_PROV)
    return sub_answer_unsupported(sel, v) is None


def _leakage(c: Case, v: Any) -> bool:
    it = IterationRecord(id="i1", item_id="x", n=1, thought="", actions=[c.text], observations=[""],
                         provenance=_PROV)
    return leaked(_item(c), PlanRecord(id="x", plan=[], provenance=_PROV), [it]) is None


def _hops(c: Case, v: Any) -> bool:
    return hops_problem(c.queries, 0) is None


def _both_sides(c: Case, v: Any) -> bool:
    entities = compared(_item(c, c.entities)) or c.entities
    return one_sided(entities, c.queries) is None


def _thought(c: Case, v: Any) -> bool:
    searched = IterationRecord(id="i1", item_id="x", n=1, thought="", actions=[c.question], observations=c.evidence,
                               provenance=_PROV)
    final = IterationRecord(id="i2", item_id="x", n=2, thought=c.text, answer=c.answer, last=True, provenance=_PROV)
    plan = PlanRecord(id="x", plan=[], provenance=_PROV)
    return planner_thought_problems(_item(c), plan, [searched, final], v) is None


def _self_contained(c: Case, v: Any) -> bool:
    return self_contained_problem(_item(c, c.entities), [c.text], v) is None


GATES = [
    Gate("evipath", "final_support", ("support",), _final_support),
    Gate("evipath", "sub_answer_support", ("support",), _sub_answer_support),
    Gate("evipath", "no_leakage", ("leakage",), _leakage),
    Gate("evipath", "hops", ("repeat",), _hops),
    Gate("evipath", "both_sides", ("comparison",), _both_sides),
    Gate("evipath", "thoughts", ("thought",), _thought),
    Gate("evipath", "self_contained", ("pronoun",), _self_contained),
]
