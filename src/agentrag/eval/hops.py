"""Hop-aware diagnosis (AgenticRAGTracer §4.3).

``diagnose(results)`` reports, over the main questions (not the lower-hop probes):

- accuracy (the ``correct`` verdict, plus mean EM/F1) by hop count;
- ``steps_c`` / ``steps_i``: mean retrieval steps of correct / incorrect answers (Steps-C, Steps-I);
- ``collapse_rate``: share of questions answered in fewer steps than hops (steps < hops), and
  ``over_extension_rate``: more steps than hops (steps > hops); also among incorrect answers only;
- ``maxd``: Tracer's maximal reasoning depth. For each question that has lower-hop questions
  (MuSiQue decompositions, Tracer data) the depth is its hop count when the question itself is
  answered correctly, else the highest level of its lower-hop questions answered correctly, else
  0; MaxD is the mean depth, reported per hop count.

Lower-hop questions come from :func:`lower_hop_items`: a ``metadata["lower_hop_questions"]`` list
(``{level, question, golden_answers}``, Tracer-style data) or, for MuSiQue, the first ``h`` steps of
the decomposition chained into one ``h``-hop question whose gold answer is step ``h``'s answer.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentrag.eval.result import EvalResult
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
        for level in range(1, len(decomposition)):
            steps = [d["question"] for d in decomposition[:level]]
            out.append(QAItem(id=f"{item.id}#L{level}", question=chain_question(steps),
                              golden_answers=[str(decomposition[level - 1]["answer"])], hops=level,
                              metadata={"lower_hop_parent": item.id, "lower_hop_level": level}))
    return out


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def diagnose(results: Sequence[EvalResult]) -> dict[str, Any]:
    """Hop-aware diagnosis of evaluated results (see the module docstring for the definitions)."""
    main = [r for r in results if r.parent_id is None]
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

    hop_table: dict[str, dict[str, Any]] = {}
    for h in sorted(by_hops):
        rs = by_hops[h]
        depths = [_depth(r, probes[r.id]) for r in rs if probes.get(r.id)]
        hop_table[str(h)] = {
            "n": len(rs),
            "accuracy": _mean([float(r.correct) for r in rs]),
            "em": _mean([r.em for r in rs]),
            "f1": _mean([r.f1 for r in rs]),
            "mean_steps": _mean([float(r.steps) for r in rs]),
            "steps_c": _mean([float(r.steps) for r in rs if r.correct]),
            "steps_i": _mean([float(r.steps) for r in rs if not r.correct]),
            "collapse_rate": rate(rs, lambda r: r.steps < (r.hops or 0)),
            "over_extension_rate": rate(rs, lambda r: r.steps > (r.hops or 0)),
            "maxd": _mean([float(d) for d in depths]),
            "maxd_n": len(depths),
        }
    all_depths = [_depth(r, probes[r.id]) for r in main if probes.get(r.id)]
    return {
        "n": len(main),
        "accuracy": _mean([float(r.correct) for r in main]),
        "steps_c": _mean([float(r.steps) for r in correct]),
        "steps_i": _mean([float(r.steps) for r in incorrect]),
        "collapse_rate": rate(with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate": rate(with_hops, lambda r: r.steps > (r.hops or 0)),
        "collapse_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps > (r.hops or 0)),
        "maxd": _mean([float(d) for d in all_depths]),
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


__all__ = ["diagnose", "lower_hop_items", "chain_question"]
