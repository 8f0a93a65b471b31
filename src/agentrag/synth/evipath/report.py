"""The EviPath run report: the funnel with rejection reasons, sub-questions per item, parallel vs
sequential actions, selected-evidence sizes and the Eq. 6 fallback rate, LLM cost and time per item."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentrag.synth.common import reason_counts, total_usage
from agentrag.synth.evipath.schema import (
    ConversationRecord,
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)


def _hist(values: list[int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(values).items())}


def metrics(*, name: str, mode: str, split: str, items: list[EviItem], plans: list[PlanRecord],
            iterations: list[IterationRecord], subs: list[SubAnswerRecord], sels: list[SelectionRecord],
            gates: list[GateRecord], convs: list[ConversationRecord], elapsed: float, exported: dict[str, Any],
            unfinished: dict[str, int]) -> dict[str, Any]:
    wanted = {i.id for i in items}
    plans = [p for p in plans if p.id in wanted]
    iterations = [r for r in iterations if r.item_id in wanted]
    subs = [s for s in subs if s.item_id in wanted]
    sels = [s for s in sels if s.item_id in wanted]
    gates = [g for g in gates if g.id in wanted]
    convs = [c for c in convs if c.item_id in wanted]
    ok_items = [i for i in items if i.status == "ok"]
    lasts = [r for r in iterations if r.last]
    answered = [r for r in lasts if r.status == "ok"]
    gate_fail: Counter[str] = Counter(r.split(":")[0] for g in gates for r in g.reasons)
    first_fail = Counter(g.reasons[0].split(":")[0] for g in gates if g.reasons)
    kept = Counter(c.role for c in convs if c.kept)
    funnel = [
        {"stage": "items (d_train)", "in": len(items), "out": len(ok_items),
         "rejected": reason_counts(i.reason for i in items if i.status != "ok")},
        {"stage": "plans (Eq. 3)", "in": len(plans), "out": sum(p.status == "ok" for p in plans),
         "rejected": reason_counts(p.reason for p in plans if p.status != "ok")},
        {"stage": "paths (Eq. 4-5)", "in": len(lasts), "out": len(answered),
         "rejected": reason_counts(r.reason for r in lasts if r.status != "ok")},
        {"stage": "sub-answers (Eq. 6 f_QA)", "in": len(subs), "out": sum(s.status == "ok" for s in subs),
         "rejected": reason_counts(s.reason for s in subs if s.status != "ok")},
        {"stage": "selections (Eq. 6 + executor thought)", "in": len(sels), "out": sum(s.status == "ok" for s in sels),
         "rejected": reason_counts(s.reason for s in sels if s.status != "ok")},
        {"stage": "gates (ours; first failed gate)", "in": len(gates), "out": sum(g.passed for g in gates),
         "rejected": dict(first_fail), "notes": {"every failed gate": dict(gate_fail)}},
        {"stage": "conversations kept (Eq. 7)", "in": len(convs), "out": sum(kept.values()),
         "rejected": {}, "notes": dict(kept)},
    ]
    done_items = sorted({r.item_id for r in lasts})
    per_item_usage = {k: total_usage([p.provenance for p in plans if p.id == k]
                                     + [r.provenance for r in iterations if r.item_id == k]
                                     + [s.provenance for s in subs if s.item_id == k]
                                     + [s.provenance for s in sels if s.item_id == k]) for k in done_items}
    n = max(1, len(done_items))
    path_seconds = {k: round(sum(p.elapsed for p in plans if p.id == k)
                             + sum(r.elapsed for r in iterations if r.item_id == k), 1) for k in done_items}
    actions = [len(r.actions) for r in iterations if r.actions]
    with_sims = [s for s in sels if s.similarities]
    return {
        "name": name, "mode": mode, "split": split, "funnel": funnel,
        "subquestions_per_item": _hist([sum(len(r.actions) for r in iterations if r.item_id == k) for k in done_items]),
        "actions": {"sequential (1 sub-question)": sum(a == 1 for a in actions),
                    "parallel (>1 sub-questions)": sum(a > 1 for a in actions)},
        "selected_evidence_sizes": _hist([len(s.gold_positions) for s in with_sims]),
        "eq6_fallback_rate": round(sum(s.fallback for s in with_sims) / len(with_sims), 3) if with_sims else None,
        "llm_per_item": {"calls": round(sum(u.calls for u in per_item_usage.values()) / n, 2),
                         "prompt_tokens": round(sum(u.prompt_tokens for u in per_item_usage.values()) / n, 1),
                         "completion_tokens": round(sum(u.completion_tokens for u in per_item_usage.values()) / n, 1)},
        "path_seconds_per_item": path_seconds,
        "elapsed": round(elapsed, 1), "seconds_per_item": round(elapsed / n, 1),
        "unfinished": unfinished, "export": exported,
    }


def sections(m: dict[str, Any]) -> list[Any]:
    from agentrag.render import Section, bar_chart_svg

    rows = [[r["stage"], r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-"]
            for r in m["funnel"]]
    notes = "; ".join(f"{r['stage']}: {r['notes']}" for r in m["funnel"] if r.get("notes"))
    subq = m["subquestions_per_item"]
    return [
        Section(title="Funnel", text=notes, headers=["stage", "in", "out", "rejected (reason: count)"], rows=rows),
        Section(title="Sub-questions per item", headers=["sub-questions", "items"], rows=[[k, v] for k, v in subq.items()],
                svg=bar_chart_svg(subq, x_label="sub-questions", y_label="items") if subq else ""),
        Section(title="Actions", headers=["kind", "iterations"], rows=[[k, v] for k, v in m["actions"].items()]),
        Section(title="Selected evidence (Eq. 6)", text=f"fallback rate (footnote 1): {m['eq6_fallback_rate']}",
                headers=["|F̂_i|", "sub-questions"], rows=[[k, v] for k, v in m["selected_evidence_sizes"].items()]),
        Section(title="Cost and time",
                text=(f"LLM per item: {m['llm_per_item']}; path wall time per item (s): {m['path_seconds_per_item']}; "
                      f"total {m['elapsed']} s ({m['seconds_per_item']} s per item); unfinished: {m['unfinished']}; "
                      f"export: {m['export']}")),
    ]


__all__ = ["metrics", "sections"]
