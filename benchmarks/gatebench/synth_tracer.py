"""The Tracer builder's gates (AgenticRAGTracer, ``agentrag.synth.tracer``) under the gate benchmark.

Each ``decide`` runs the Tracer's own gate function on the case (never the shared checks directly):

- ``answer_no_answer``: the §3.2 atomic filter (:func:`~agentrag.synth.tracer.atomic.malformed_reason`)
  — an answer that says there is no answer is ``empty_answer``;
- ``alias_no_answer``: the aliases a generator reply gives (``QAPair.clean_aliases``) and the golds a
  benchmark row exports (:func:`~agentrag.synth.tracer.export.benchmark_item`) — a no-answer alias
  is removed;
- ``gold_no_answer``: the export (:func:`~agentrag.synth.tracer.export.exportable`) — an item whose
  answer says there is none is dropped;
- ``leakage``: the structural stage's leakage check (:func:`~agentrag.synth.tracer.verify.leaked`)
  — an earlier or final answer written into the composed question in any form, or a part of it;
- ``bridge_restated``: the structural stage's check that an inference step does not answer with
  the bridge entity again (:func:`~agentrag.synth.tracer.verify.restated_bridge`);
- ``one_answer``: the and/or rule that replaced the released code's (an answer joining parts with
  "and", "&", "/", "or": :func:`~agentrag.synth.tracer.atomic.one_answer_problem`).
"""

from __future__ import annotations

from typing import Any

from agentrag.synth.tracer.atomic import malformed_reason, one_answer_problem
from agentrag.synth.tracer.export import benchmark_item, exportable
from agentrag.synth.tracer.outputs import QAPair
from agentrag.synth.tracer.schema import Chain, Hop
from agentrag.synth.tracer.verify import leaked, restated_bridge
from gatebench.cases import Case, Gate

_Q = "Which theological perspective is associated with the church?"


def _hop(level: int, answer: str, aliases: list[str] | None = None, doc: str = "", question: str = _Q) -> Hop:
    return Hop(level=level, template="atomic" if level == 1 else "inference", atomic_question=question,
               atomic_answer=answer, atomic_aliases=aliases or [], doc_id=f"d{level}", doc_text=doc,
               question=question, answer=answer, aliases=aliases or [], verified=True)


def _answer_no_answer(c: Case, v: Any) -> bool:
    question = c.question if c.question.strip().endswith("?") else _Q
    reason = malformed_reason(question, c.answer, max_answer_words=50) or ""
    return not reason.startswith(("empty_answer", "malformed: empty"))


def _alias_no_answer(c: Case, v: Any) -> bool:
    kept = c.answer in QAPair(question=_Q, answer="Arminianism", aliases=[c.answer]).clean_aliases()
    chain = Chain(id="c", hops=[_hop(1, "Wesleyan church"), _hop(2, "Arminianism", [c.answer])])
    exported = c.answer in benchmark_item(chain, 2).golden_answers
    return kept and exported


def _gold_no_answer(c: Case, v: Any) -> bool:
    return exportable([_hop(1, "Wesleyan church"), _hop(2, c.answer)])


def _leakage(c: Case, v: Any) -> bool:
    return leaked(c.text, [c.answer, *c.aliases], c.question) is None


def _bridge(c: Case, v: Any) -> bool:
    prev = _hop(1, c.answer, c.aliases, doc=c.evidence[0] if c.evidence else "")
    cand = _hop(2, c.text, doc=c.evidence[-1] if c.evidence else "", question=c.question or _Q)
    return restated_bridge([prev], cand, c.evidence, v) is None


def _one_answer(c: Case, v: Any) -> bool:
    return one_answer_problem(c.answer, c.evidence, question=c.question, verifier=v) is None


GATES = [
    Gate("tracer", "answer_no_answer", ("no_answer",), _answer_no_answer),
    Gate("tracer", "alias_no_answer", ("no_answer",), _alias_no_answer),
    Gate("tracer", "gold_no_answer", ("no_answer",), _gold_no_answer),
    Gate("tracer", "leakage", ("leakage",), _leakage),
    Gate("tracer", "bridge_restated", ("bridge",), _bridge),
    Gate("tracer", "one_answer", ("one_answer",), _one_answer),
]
