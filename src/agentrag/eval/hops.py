"""Hop-aware diagnosis (AgenticRAGTracer §4.3, Table 2, Fig. 3).

``diagnose(results)`` reports, over the main questions (not the lower-hop probes) whose verdict
is known (an item with a ``judge_error`` has ``correct=None`` and is left out and counted):

- accuracy (the ``correct`` verdict, plus mean EM/F1) by hop count;
- ``steps_c`` / ``steps_i``: mean retrieval steps of correct / incorrect answers (Steps-C,
  Steps-I; a step is one retrieval call: answer calls and refused calls are not steps);
- ``collapse_rate``: share of questions answered in fewer steps than hops (steps < hops), and
  ``over_extension_rate``: more steps than hops (steps > hops); also among incorrect answers only;
- ``topk_c`` / ``topk_i``: mean top-k per retrieval step of correct / incorrect answers (Fig. 3);
- ``maxd``: Tracer's maximal reasoning depth, over 3- and 4-hop questions only ("for each 3- and
  4-hop question, we record the average of the highest corresponding lower-hop questions that
  the model answers correctly"): a question's depth is its hop count when it is answered
  correctly, else the highest level of its lower-hop questions answered correctly, else 0;
- ``table2``: MaxD, Steps-C and Steps-I per subset of Table 2: ``3hop`` / ``4hop`` (and
  ``comparison-3hop`` ... when ``metadata.type`` says comparison or inference).

Lower-hop questions come from :func:`lower_hop_items`: a ``metadata["lower_hop_questions"]`` list
(``{level, question, golden_answers}``, Tracer-style data) or, for MuSiQue, the sub-question
graph of the decomposition (``#k`` refers to the answer of sub-question k): the level-h probe of
sub-question j chains j and every sub-question it depends on (h of them in all) and asks for j's
answer. For a chain (2hop, 3hop1, 4hop1) that is the prefix of length h; for 3hop2, 4hop2 and
4hop3 it follows the graph, so a level exists only where some sub-question needs exactly h hops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from agentrag.eval.result import EvalResult
from agentrag.eval.summary import MAXD_MIN_HOPS, HopDiagnosis, subset_name
from agentrag.records import QAItem

_REF = re.compile(r"#(\d+)")


def _step_text(question: str) -> str:
    """A MuSiQue decomposition step as a question (``"X >> relation"`` → ``"What is the relation of X?"``)."""
    q = " ".join(question.split())
    if ">>" in q:
        subject, _, relation = q.partition(">>")
        return f"What is the {relation.strip()} of {subject.strip()}?"
    return q if q.endswith("?") else q + "?"


def chain_question(steps: Sequence[str]) -> str:
    """Chain decomposition steps into one multi-hop question; ``#k`` is the answer of step ``k``."""
    if len(steps) == 1:
        return _step_text(steps[0])
    numbered = " ".join(f"({i}) {_step_text(s)}" for i, s in enumerate(steps, start=1))
    return (f"Answer this chain of questions, where #k stands for the answer of question k: {numbered} "
            f"What is the answer of question {len(steps)}?")


def dependencies(decomposition: Sequence[dict[str, Any]]) -> list[set[int]]:
    """For each sub-question (0-based), the 0-based sub-questions it needs, transitively, itself included."""
    closures: list[set[int]] = []
    for j, d in enumerate(decomposition):
        closure = {j}
        for ref in _REF.findall(str(d.get("question", ""))):
            k = int(ref) - 1
            if 0 <= k < j:
                closure |= closures[k]
        closures.append(closure)
    return closures


def subgraph_question(decomposition: Sequence[dict[str, Any]], nodes: set[int]) -> str:
    """The sub-questions ``nodes`` (0-based) renumbered 1..n in order, ``#k`` references rewritten."""
    order = sorted(nodes)
    new_index = {old + 1: new for new, old in enumerate(order, start=1)}

    def renumber(q: str) -> str:
        return _REF.sub(lambda m: f"#{new_index.get(int(m.group(1)), m.group(1))}", q)

    return chain_question([renumber(str(decomposition[i]["question"])) for i in order])


def lower_hop_items(item: QAItem) -> list[QAItem]:
    """The lower-hop questions of ``item`` (levels 1..hops-1) as QAItems; their metadata carries
    ``lower_hop_parent`` and ``lower_hop_level``."""
    meta = item.metadata
    out: list[QAItem] = []
    explicit = meta.get("lower_hop_questions")
    if isinstance(explicit, list):
        for q in explicit:
            level = int(q["level"])
            out.append(QAItem(id=f"{item.id}#L{level}", question=str(q["question"]),
                              golden_answers=[str(a) for a in q["golden_answers"]], hops=level,
                              metadata={"lower_hop_parent": item.id, "lower_hop_level": level}))
        return out
    decomposition = meta.get("decomposition")
    if isinstance(decomposition, list) and len(decomposition) > 1:
        closures = dependencies(decomposition)
        chosen: dict[int, int] = {}
        for j, closure in enumerate(closures[:-1]):  # the last sub-question is the question itself
            chosen.setdefault(len(closure), j)  # the first sub-question needing exactly h hops
        for level in sorted(chosen):
            if level >= len(decomposition):
                continue
            j = chosen[level]
            out.append(QAItem(id=f"{item.id}#L{level}", question=subgraph_question(decomposition, closures[j]),
                              golden_answers=[str(decomposition[j]["answer"])], hops=level,
                              metadata={"lower_hop_parent": item.id, "lower_hop_level": level}))
    return out


def diagnose(results: Iterable[EvalResult]) -> dict[str, Any]:
    """Hop-aware diagnosis of evaluated results (see the module docstring for the definitions);
    one pass over ``results`` (a list or a run's ``results.jsonl``), none of them held."""
    acc = HopDiagnosis()
    for r in results:
        acc.add(r)
    return acc.result()


__all__ = ["diagnose", "lower_hop_items", "chain_question", "dependencies", "subgraph_question", "subset_name",
           "MAXD_MIN_HOPS"]
