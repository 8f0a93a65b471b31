"""The EviPath statistics and report: the funnel counts per declared stage (with rejection
reasons), sub-questions per item, parallel vs sequential actions, selected-evidence sizes and the
Eq. 6 fallback rate, LLM cost and time per item. The driver assembles ``metrics.json`` from
:func:`statistics` (funnel counts + the synthesizer's own ``details``); :func:`sections` renders it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
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

Counts = dict[str, tuple[int, int, Mapping[str, int]]]


def _hist(values: list[int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(values).items())}


def statistics(*, mode: str, split: str, items: list[EviItem], plans: list[PlanRecord],
               iterations: list[IterationRecord], subs: list[SubAnswerRecord], sels: list[SelectionRecord],
               gates: list[GateRecord], convs: list[ConversationRecord], exported: dict[str, Any],
               export_roles: tuple[str, ...]) -> tuple[Counts, dict[str, Any]]:
    """``(counts per declared stage, details)`` over the records of ``items``."""
    wanted = {i.id for i in items}
    plans = [p for p in plans if p.id in wanted]
    iterations = [r for r in iterations if r.item_id in wanted]
    subs = [s for s in subs if s.item_id in wanted]
    sels = [s for s in sels if s.item_id in wanted]
    gates = [g for g in gates if g.id in wanted]
    convs = [c for c in convs if c.item_id in wanted]
    lasts = [r for r in iterations if r.last]
    kept: Counter[str] = Counter(c.role for c in convs if c.kept)
    to_export = sum(kept[r] for r in export_roles)
    counts: Counts = {
        "items": (len(items), sum(i.status == "ok" for i in items),
                  reason_counts(i.reason for i in items if i.status != "ok")),
        "plans": (len(plans), sum(p.status == "ok" for p in plans),
                  reason_counts(p.reason for p in plans if p.status != "ok")),
        "paths": (len(lasts), sum(r.status == "ok" for r in lasts),
                  reason_counts(r.reason for r in lasts if r.status != "ok")),
        "sub_answers": (len(subs), sum(s.status == "ok" for s in subs),
                        reason_counts(s.reason for s in subs if s.status != "ok")),
        "selections": (len(sels), sum(s.status == "ok" for s in sels),
                       reason_counts(s.reason for s in sels if s.status != "ok")),
        "gates": (len(gates), sum(g.passed for g in gates),
                  dict(Counter(g.reasons[0].split(":")[0] for g in gates if g.reasons))),
        "conversations": (len(convs), sum(kept.values()), {"failed_gates": len(convs) - sum(kept.values())}
                          if len(convs) > sum(kept.values()) else {}),
        "export": (to_export, int(exported.get("exported", 0) or 0),
                   {"not_exported": to_export} if "skipped" in exported and to_export else {}),
    }
    done_items = sorted({r.item_id for r in lasts})
    # one pass per record kind, grouped by item (linear in the number of records)
    provs: dict[str, list[Any]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    n_subq: dict[str, int] = defaultdict(int)
    for p in plans:
        provs[p.id].append(p.provenance)
        seconds[p.id] += p.elapsed
    for r in iterations:
        provs[r.item_id].append(r.provenance)
        seconds[r.item_id] += r.elapsed
        n_subq[r.item_id] += len(r.actions)
    for s in subs:
        provs[s.item_id].append(s.provenance)
    for sel in sels:
        provs[sel.item_id].append(sel.provenance)
    per_item_usage = {k: total_usage(provs[k]) for k in done_items}
    n = max(1, len(done_items))
    path_seconds = {k: round(seconds[k], 1) for k in done_items}
    actions = [len(r.actions) for r in iterations if r.actions]
    with_sims = [s for s in sels if s.similarities]
    details = {
        "mode": mode, "split": split, "items": len(items),
        "gate_failures": dict(Counter(r.split(":")[0] for g in gates for r in g.reasons)),
        "conversations_kept": dict(kept),
        "subquestions_per_item": _hist([n_subq[k] for k in done_items]),
        "actions": {"sequential (1 sub-question)": sum(a == 1 for a in actions),
                    "parallel (>1 sub-questions)": sum(a > 1 for a in actions)},
        "selected_evidence_sizes": _hist([len(s.gold_positions) for s in with_sims]),
        "eq6_fallback_rate": round(sum(s.fallback for s in with_sims) / len(with_sims), 3) if with_sims else None,
        "llm_per_item": {"calls": round(sum(u.calls for u in per_item_usage.values()) / n, 2),
                         "prompt_tokens": round(sum(u.prompt_tokens for u in per_item_usage.values()) / n, 1),
                         "completion_tokens": round(sum(u.completion_tokens for u in per_item_usage.values()) / n, 1)},
        "path_seconds_per_item": path_seconds,
        "items_finished": len(done_items),
    }
    return counts, details


def sections(m: dict[str, Any], about: Mapping[str, str]) -> list[Any]:
    """The report's sections from ``metrics.json``'s object (``about``: stage name -> its label)."""
    from agentrag.render import Section, bar_chart_svg

    rows = [[f"{r['stage']} ({about[r['stage']]})" if about.get(r["stage"]) else r["stage"], r["in"], r["out"],
             ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-", r.get("unfinished", 0)]
            for r in m["funnel"]]
    notes = f"every failed gate: {m.get('gate_failures', {})}; conversations kept: {m.get('conversations_kept', {})}"
    subq = m.get("subquestions_per_item", {})
    n = max(1, m.get("items_finished", 0))
    llm_rows = [[role, ", ".join(f"{k}: {v}" for k, v in st.items())] for role, st in m.get("llm", {}).items()]
    return [
        Section(title="Funnel", text=notes, headers=["stage", "in", "out", "rejected (reason: count)", "unfinished"],
                rows=rows),
        Section(title="Sub-questions per item", headers=["sub-questions", "items"], rows=[[k, v] for k, v in subq.items()],
                svg=bar_chart_svg(subq, x_label="sub-questions", y_label="items") if subq else ""),
        Section(title="Actions", headers=["kind", "iterations"], rows=[[k, v] for k, v in m.get("actions", {}).items()]),
        Section(title="Selected evidence (Eq. 6)", text=f"fallback rate (footnote 1): {m.get('eq6_fallback_rate')}",
                headers=["|F̂_i|", "sub-questions"],
                rows=[[k, v] for k, v in m.get("selected_evidence_sizes", {}).items()]),
        Section(title="LLM usage", text=f"per finished item: {m.get('llm_per_item')}", headers=["role", "stats"],
                rows=llm_rows),
        Section(title="Cost and time",
                text=(f"path wall time per item (s): {m.get('path_seconds_per_item')}; total {m['wall_s']} s "
                      f"({round(m['wall_s'] / n, 1)} s per finished item); unfinished: {m['unfinished']} "
                      f"{m.get('unfinished_by_stage') or ''}; bugs: {m.get('bugs', 0)}; export: {m['export']}")),
    ]


__all__ = ["statistics", "sections"]
