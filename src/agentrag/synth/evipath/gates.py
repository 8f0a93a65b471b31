"""Quality gates on a synthesized path. The paper applies none; these are ours, each counted in
the report with its reason:

- ``final_answer``: the planner's answer has F1 > threshold against the gold answers;
- ``path_complete``: the path ended with an answer (no parse/LLM failure, within the budget);
- ``select_subset``: every executor ``<select>`` is non-empty and inside F̂_i (its positions);
- ``no_leakage``: the gold answer does not appear in the plan or a planner thought/action before
  an observation has returned it (the abductive prompt shows the answer); an answer that the
  question itself names (comparison questions) is exempt;
- ``interrogative``: every action is a question (ends with '?') with no unfilled ``#k`` placeholder;
- ``hops``: the number of sub-questions is at least the dataset's hop count.
"""

from __future__ import annotations

import re

from agentrag.eval.metrics import f1, normalize_answer
from agentrag.synth.evipath.config import GateConfig
from agentrag.synth.evipath.schema import EviItem, GateRecord, IterationRecord, PlanRecord, SelectionRecord

_PLACEHOLDER = re.compile(r"#\d+|\[X\]|\[\d+\]")


def _contains(text: str, needle: str) -> bool:
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in f" {normalize_answer(text)} "


def leaked(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord]) -> str | None:
    """Where the gold answer shows up before an observation returned it, or None."""
    # an answer the question itself names (comparisons: "A or B?") is given, not leaked
    answers = [a for a in item.answers if normalize_answer(a) and not _contains(item.question, a)]
    seen_in_obs = False
    for k, q in enumerate(plan.plan, start=1):
        if any(_contains(q, a) for a in answers):
            return f"plan step {k}"
    for it in iterations:
        if not seen_in_obs:
            for a in answers:
                if _contains(it.thought, a):
                    return f"thought of iteration {it.n}"
                if any(_contains(q, a) for q in it.actions):
                    return f"action of iteration {it.n}"
        if any(_contains(o, a) for o in it.observations for a in answers):
            seen_in_obs = True
    return None


def selection_ok(sel: SelectionRecord) -> str | None:
    if sel.status != "ok" or sel.select is None:
        return sel.reason or "no selection"
    if not sel.select:
        return "empty <select>"
    extra = sorted(set(sel.select) - set(sel.gold_positions))
    return f"selected {extra} outside F̂_i {sel.gold_positions}" if extra else None


def check_path(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord],
               selections: list[SelectionRecord], cfg: GateConfig) -> GateRecord:
    """Run every gate on one item's path."""
    checks: dict[str, bool] = {}
    reasons: list[str] = []

    def gate(name: str, problem: str | None) -> None:
        checks[name] = problem is None
        if problem is not None:
            reasons.append(f"{name}: {problem}")

    final = iterations[-1] if iterations else None
    complete = final is not None and final.status == "ok" and final.answer is not None
    gate("path_complete", None if complete else ((final.reason if final else None) or "no iterations"))
    prediction = final.answer if complete and final else None
    score = f1(prediction, item.answers) if prediction else 0.0
    gate("final_answer", None if score > cfg.f1_threshold else f"f1={score:.3f} <= {cfg.f1_threshold}")
    actions = [q for it in iterations for q in it.actions]
    bad = {s.id: selection_ok(s) for s in selections}
    problems = [f"{k}: {v}" for k, v in bad.items() if v] + (["no selections"] if actions and not selections else [])
    gate("select_subset", "; ".join(problems) if problems else None)
    if cfg.check_leakage:
        where = leaked(item, plan, iterations)
        gate("no_leakage", f"gold answer in the {where} before any observation returned it" if where else None)
    if cfg.check_interrogative:
        bad_q = [q for q in actions if not q.rstrip().endswith("?") or _PLACEHOLDER.search(q)]
        gate("interrogative", f"not a complete question: {bad_q[0]!r}" if bad_q else None)
    if cfg.check_hops:
        gate("hops", None if len(actions) >= item.hops else f"{len(actions)} sub-questions < {item.hops} hops")
    return GateRecord(id=item.id, passed=all(checks.values()), checks=checks, reasons=reasons, prediction=prediction,
                      f1=round(score, 4), n_subquestions=len(actions), hops=item.hops,
                      executor_kept=[k for k, v in bad.items() if v is None])


__all__ = ["check_path", "leaked", "selection_ok"]
