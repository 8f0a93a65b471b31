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
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentrag.eval.result import EvalResult
from agentrag.records import QAItem

_REF = re.compile(r"#(\d+)")
TYPES = ("comparison", "inference")
#: Tracer measures MaxD (and Table 2's steps) on the 3- and 4-hop questions only
MAXD_MIN_HOPS = 3


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


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _topk(rs: Sequence[EvalResult]) -> float | None:
    return _mean([float(k) for r in rs for k in r.topk_per_step])


def subset_name(result: EvalResult) -> str:
    """Table 2's subset of a result: ``comparison-3hop`` when the data says the type, else ``3hop``."""
    qtype = str(result.metadata.get("type", "")).lower()
    return f"{qtype}-{result.hops}hop" if qtype in TYPES else f"{result.hops}hop"


def diagnose(results: Sequence[EvalResult]) -> dict[str, Any]:
    """Hop-aware diagnosis of evaluated results (see the module docstring for the definitions)."""
    everything = [r for r in results if r.parent_id is None]
    main = [r for r in everything if r.correct is not None]
    probes: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        if r.parent_id is not None:
            probes[r.parent_id].append(r)

    by_hops: dict[int, list[EvalResult]] = defaultdict(list)
    for r in main:
        if r.hops is not None:
            by_hops[r.hops].append(r)

    correct = [r for r in main if r.correct]
    incorrect = [r for r in main if not r.correct]
    with_hops = [r for r in main if r.hops is not None]
    wrong_with_hops = [r for r in incorrect if r.hops is not None]

    def rate(rs: Sequence[EvalResult], cond: Any) -> float | None:
        return _mean([1.0 if cond(r) else 0.0 for r in rs])

    def depths(rs: Sequence[EvalResult]) -> list[float]:
        return [float(_depth(r, probes[r.id])) for r in rs
                if (r.hops or 0) >= MAXD_MIN_HOPS and probes.get(r.id)]

    hop_table: dict[str, dict[str, Any]] = {}
    for h in sorted(by_hops):
        rs = by_hops[h]
        ds = depths(rs)
        hop_table[str(h)] = {
            "n": len(rs),
            "accuracy": _mean([float(bool(r.correct)) for r in rs]),
            "em": _mean([r.em for r in rs]),
            "f1": _mean([r.f1 for r in rs]),
            "mean_steps": _mean([float(r.steps) for r in rs]),
            "steps_c": _mean([float(r.steps) for r in rs if r.correct]),
            "steps_i": _mean([float(r.steps) for r in rs if not r.correct]),
            "collapse_rate": rate(rs, lambda r: r.steps < (r.hops or 0)),
            "over_extension_rate": rate(rs, lambda r: r.steps > (r.hops or 0)),
            "topk_c": _topk([r for r in rs if r.correct]),
            "topk_i": _topk([r for r in rs if not r.correct]),
            "maxd": _mean(ds),
            "maxd_n": len(ds),
        }
    subsets: dict[str, list[EvalResult]] = defaultdict(list)
    for r in with_hops:
        if (r.hops or 0) >= MAXD_MIN_HOPS:
            subsets[subset_name(r)].append(r)
    table2 = {name: {"n": len(rs), "maxd": _mean(depths(rs)), "maxd_n": len(depths(rs)),
                     "steps_c": _mean([float(r.steps) for r in rs if r.correct]),
                     "steps_i": _mean([float(r.steps) for r in rs if not r.correct])}
              for name, rs in sorted(subsets.items())}
    return {
        "n": len(main),
        "unjudged": len(everything) - len(main),
        "accuracy": _mean([float(bool(r.correct)) for r in main]),
        "steps_c": _mean([float(r.steps) for r in correct]),
        "steps_i": _mean([float(r.steps) for r in incorrect]),
        "collapse_rate": rate(with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate": rate(with_hops, lambda r: r.steps > (r.hops or 0)),
        "collapse_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps > (r.hops or 0)),
        "topk_c": _topk(correct),
        "topk_i": _topk(incorrect),
        "maxd": _mean(depths(with_hops)),
        "table2": table2,
        "by_hops": hop_table,
        "step_histogram": _histogram([r.steps for r in main]),
    }


def _depth(result: EvalResult, lower: Sequence[EvalResult]) -> int:
    if result.correct:
        return result.hops or 0
    return max((r.level or 0 for r in lower if r.correct), default=0)


def _histogram(values: Sequence[int]) -> dict[str, int]:
    """Counts per value over the whole range min..max (empty bins included, so gaps show)."""
    counts: dict[int, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    if not counts:
        return {}
    return {str(k): counts[k] for k in range(min(counts), max(counts) + 1)}


__all__ = ["diagnose", "lower_hop_items", "chain_question", "dependencies", "subgraph_question", "subset_name",
           "MAXD_MIN_HOPS"]
