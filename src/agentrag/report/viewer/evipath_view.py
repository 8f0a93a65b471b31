"""EviPath runs: one row per item; its plan (Eq. 3) and iterations (Eq. 4–5) beside the
executor's selections (Eq. 6): for each sub-question the indexed evidence F with the positions of
F̂_i (cosine > τ) and the executor's own selection marked, the similarities and the thought, and
the quality gates' verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.report.viewer.common import (
    Limits,
    Payload,
    col,
    display_name,
    failures_filter,
    funnel_table,
    metric_rows,
    read_grouped,
    read_json,
    read_stage,
    select_filter,
    table,
)
from agentrag.synth.evipath.schema import (
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)

#: the texts an item is judged by (question, gold and final answer, first failed gate) share the list's width
COLUMNS = [col("id", "item id"), col("question", "question", pin=True), col("answer", "answer", pin=True),
           col("hops", "hops", "num"), col("plan", "plan steps", "num"), col("iterations", "iterations", "num"),
           col("prediction", "final answer", pin=True), col("f1", "F1", "num"), col("gate", "gates", pin=True),
           col("ok", "passed", "bool")]


def _selection(sel: SelectionRecord | None, limits: Limits) -> dict[str, Any] | None:
    if sel is None:
        return None
    return {"evidence": [limits.clip(e) for e in sel.evidence], "gold": sel.gold_positions,
            "sims": [round(s, 4) for s in sel.similarities], "fallback": sel.fallback, "thought": limits.clip(sel.thought),
            "select": sel.select, "status": sel.status, "reason": sel.reason}


def evipath_payload(run_dir: Path, limits: Limits) -> Payload:
    items = read_stage(run_dir, "items", EviItem)
    plans = {x.id: x for x in read_stage(run_dir, "plans", PlanRecord)}
    iterations = read_grouped(run_dir, "iterations", IterationRecord, lambda it: it.item_id)
    subs = read_grouped(run_dir, "sub_answers", SubAnswerRecord, lambda s: s.item_id)
    sels = {s.id: s for s in read_stage(run_dir, "selections", SelectionRecord)}
    gates = {g.id: g for g in read_stage(run_dir, "gates", GateRecord)}
    metrics = read_json(run_dir, "metrics.json")
    p = Payload(kind="evipath", title=f"EviPath run {display_name(run_dir)}", columns=COLUMNS, limits=limits,
                filters=[failures_filter(), select_filter("gate", "gates"), select_filter("hops", "hops")])
    scalars = list(metric_rows(metrics, ("mode", "split", "items", "unfinished", "eq6_fallback_rate", "wall_s")))
    if scalars:
        p.summary.append(table("Run", ["metric", "value"], scalars))
    funnel = funnel_table(metrics)
    if funnel:
        p.summary.append(funnel)
    for item in items:
        plan, gate = plans.get(item.id), gates.get(item.id)
        its = sorted(iterations.get(item.id, []), key=lambda r: r.n)
        final = next((r.answer for r in reversed(its) if r.answer is not None), None)
        gate_text = "pending" if gate is None else "passed" if gate.passed else (gate.reasons[0] if gate.reasons else "failed")
        if item.status != "ok":
            gate_text = f"skipped: {item.reason}"
        detail = {
            "question": item.question, "answer": item.answer, "answers": item.answers, "hops": item.hops,
            "facts": [[f.title, limits.clip(f.text)] for f in item.facts], "gold": item.gold,
            "plan": None if plan is None else {"status": plan.status, "reason": plan.reason, "steps": plan.plan},
            "iterations": [{"n": r.n, "thought": limits.clip(r.thought), "actions": r.actions,
                            "observations": [limits.clip(o) for o in r.observations], "answer": r.answer,
                            "last": r.last, "status": r.status, "reason": r.reason} for r in its],
            "subs": [{"id": s.id, "iteration": s.iteration, "question": s.question, "answer": s.answer,
                      "status": s.status, "reason": s.reason, "sel": _selection(sels.get(s.id), limits)}
                     for s in sorted(subs.get(item.id, []), key=lambda s: (s.iteration, s.id))],
            "gate": None if gate is None else {"passed": gate.passed, "checks": gate.checks, "reasons": gate.reasons,
                                               "prediction": gate.prediction, "f1": gate.f1,
                                               "executor_kept": gate.executor_kept},
        }
        p.add({"id": item.id, "question": item.question[:200], "answer": item.answer, "hops": item.hops,
               "plan": len(plan.plan) if plan else 0, "iterations": len(its), "prediction": final,
               "f1": round(f1(final, item.answers or [item.answer]), 3) if final else 0.0, "gate": gate_text,
               "ok": bool(gate and gate.passed)}, detail)
    return p


__all__ = ["evipath_payload"]
