"""The EviPath statistics and report: the funnel counts per declared stage (with rejection
reasons), sub-questions per item, parallel vs sequential actions, selected-evidence sizes and the
Eq. 6 fallback rate, LLM cost and time per item. The driver assembles ``metrics.json`` from
:func:`statistics` (funnel counts + the synthesizer's own ``details``); :func:`sections` renders it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from agentrag.records import Usage
from agentrag.synth.common import reason_counts
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


def _hist(values: Iterable[int] | Counter[int]) -> dict[str, int]:
    counts = values if isinstance(values, Counter) else Counter(values)
    return {str(k): v for k, v in sorted(counts.items())}


class _Tally:
    """Records in, records out, and the rejection reasons (kind before the colon) of the others."""

    def __init__(self) -> None:
        self.n = self.ok = 0
        self.rejected: Counter[str] = Counter()

    def add(self, ok: bool, reason: str | None) -> None:
        self.n += 1
        self.ok += ok
        if not ok and reason:
            self.rejected[reason.split(":")[0]] += 1

    def row(self) -> tuple[int, int, Mapping[str, int]]:
        return self.n, self.ok, dict(self.rejected)


def statistics(*, mode: str, split: str, items: Iterable[EviItem], plans: Iterable[PlanRecord],
               iterations: Iterable[IterationRecord], subs: Iterable[SubAnswerRecord], sels: Iterable[SelectionRecord],
               gates: Iterable[GateRecord], convs: Iterable[ConversationRecord], exported: dict[str, Any],
               export_roles: tuple[str, ...]) -> tuple[Counts, dict[str, Any]]:
    """``(counts per declared stage, details)`` over the records of ``items``.

    One streaming pass over each record kind (the stage files can be passed as they are: a
    :class:`~agentrag.runs.JsonlStore` is read line by line): memory holds counters per item,
    never the records, and the work is linear in the records."""
    wanted: set[str] = set()
    n_items = n_ok_items = 0
    item_reasons: list[str | None] = []
    for i in items:
        wanted.add(i.id)
        n_items += 1
        n_ok_items += i.status == "ok"
        if i.status != "ok":
            item_reasons.append(i.reason)
    usage: dict[str, Usage] = defaultdict(Usage)
    seconds: dict[str, float] = defaultdict(float)
    n_subq: dict[str, int] = defaultdict(int)
    t_plans, t_paths, t_subs, t_sels, t_gates = _Tally(), _Tally(), _Tally(), _Tally(), _Tally()
    # an item rejected at one stage is not counted (rejected again) at the next: its "in" is the
    # "out" above it (a failed plan still writes a failed path and a gate record, for the report)
    unplanned: set[str] = set()
    for p in plans:
        if p.id in wanted:
            t_plans.add(p.status == "ok", p.reason)
            if p.status != "ok":
                unplanned.add(p.id)
            usage[p.id] += p.provenance.usage
            seconds[p.id] += p.elapsed
    done: set[str] = set()
    answered: set[str] = set()  # paths that reached an answer: what the sub-question histogram counts
    sequential = parallel = 0
    for r in iterations:
        if r.item_id not in wanted:
            continue
        if r.last:
            if r.item_id not in unplanned:
                t_paths.add(r.status == "ok", r.reason)
            done.add(r.item_id)
            if r.status == "ok":
                answered.add(r.item_id)
        usage[r.item_id] += r.provenance.usage
        seconds[r.item_id] += r.elapsed
        n_subq[r.item_id] += len(r.actions)
        sequential += len(r.actions) == 1
        parallel += len(r.actions) > 1
    for s in subs:
        if s.item_id in wanted:
            t_subs.add(s.status == "ok", s.reason)
            usage[s.item_id] += s.provenance.usage
    sizes: Counter[int] = Counter()
    with_sims = fallbacks = repairs = 0
    for sel in sels:
        if sel.item_id not in wanted:
            continue
        t_sels.add(sel.status == "ok", sel.reason)
        usage[sel.item_id] += sel.provenance.usage
        if sel.similarities:
            with_sims += 1
            fallbacks += sel.fallback
            repairs += sel.repaired
            sizes[len(sel.gold_positions)] += 1
    first_reasons: Counter[str] = Counter()
    gate_failures: Counter[str] = Counter()
    for g in gates:
        if g.id not in wanted:
            continue
        gate_failures.update(r.split(":")[0] for r in g.reasons)
        if g.id not in answered or g.id in unplanned:  # rejected at plans or paths: counted there
            continue
        t_gates.n += 1
        t_gates.ok += g.passed
        if g.reasons:
            first_reasons[g.reasons[0].split(":")[0]] += 1
    kept: Counter[str] = Counter()
    n_convs = 0
    for c in convs:
        if c.item_id in wanted and c.item_id in answered and c.item_id not in unplanned:
            n_convs += 1
            if c.kept:
                kept[c.role] += 1
    to_export = sum(kept[r] for r in export_roles)
    n_kept = sum(kept.values())
    counts: Counts = {
        "items": (n_items, n_ok_items, reason_counts(item_reasons)),
        "plans": t_plans.row(),
        "paths": t_paths.row(),
        "sub_answers": t_subs.row(),
        "selections": t_sels.row(),
        "gates": (t_gates.n, t_gates.ok, dict(first_reasons)),
        "conversations": (n_convs, n_kept, {"failed_gates": n_convs - n_kept} if n_convs > n_kept else {}),
        "export": (to_export, int(exported.get("exported", 0) or 0),
                   {"not_exported": to_export} if "skipped" in exported and to_export else {}),
    }
    done_items = sorted(done)
    n = max(1, len(done_items))
    per_item = [usage[k] for k in done_items]
    details = {
        "mode": mode, "split": split, "items": n_items,
        "gate_failures": dict(gate_failures),
        "conversations_kept": dict(kept),
        # a path that failed (a malformed action, the iteration limit) asked fewer sub-questions than
        # its plan has steps; the histogram counts the paths that reached an answer
        "subquestions_per_item": _hist(n_subq[k] for k in done_items if k in answered),
        "actions": {"sequential (1 sub-question)": sequential, "parallel (>1 sub-questions)": parallel},
        "selected_evidence_sizes": _hist(sizes),
        "eq6_fallback_rate": round(fallbacks / with_sims, 3) if with_sims else None,
        "eq6_repair_rate": round(repairs / with_sims, 3) if with_sims else None,
        "llm_per_item": {"calls": round(sum(u.calls for u in per_item) / n, 2),
                         "prompt_tokens": round(sum(u.prompt_tokens for u in per_item) / n, 1),
                         "completion_tokens": round(sum(u.completion_tokens for u in per_item) / n, 1)},
        "path_seconds_per_item": {k: round(seconds[k], 1) for k in done_items},
        "items_finished": len(done_items),
    }
    return counts, details


def sections(m: dict[str, Any], about: Mapping[str, str]) -> list[Any]:
    """The report's sections from ``metrics.json``'s object (``about``: stage name -> its label)."""
    from agentrag.render import Section, bar_chart_svg

    rows = [[f"{r['stage']} ({about[r['stage']]})" if about.get(r["stage"]) else r["stage"], r.get("unit") or "items",
             r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-", r.get("unfinished", 0)]
            for r in m["funnel"]]
    notes = f"every failed gate: {m.get('gate_failures', {})}; conversations kept: {m.get('conversations_kept', {})}"
    subq = m.get("subquestions_per_item", {})
    n = max(1, m.get("items_finished", 0))
    llm_rows = [[role, ", ".join(f"{k}: {v}" for k, v in st.items())] for role, st in m.get("llm", {}).items()]
    return [
        Section(title="Funnel", text=notes + "; in and out count what the 'counts' column names (a path of "
                "k sub-questions gives k sub-answers and selections, and 1 planner + k executor conversations)",
                headers=["stage", "counts", "in", "out", "rejected (reason: count)", "unfinished"],
                rows=rows),
        Section(title="Sub-questions per item", text="over the paths that reached an answer (a failed path is in "
                "the funnel's paths rejections)", headers=["sub-questions", "items"], rows=[[k, v] for k, v in subq.items()],
                svg=bar_chart_svg(subq, x_label="sub-questions", y_label="items") if subq else ""),
        Section(title="Actions", headers=["kind", "iterations"], rows=[[k, v] for k, v in m.get("actions", {}).items()]),
        Section(title="Selected evidence (Eq. 6)", text=f"fallback rate (footnote 1): {m.get('eq6_fallback_rate')}; "
                f"repair rate (evidence chosen that does not state the sub-answer, replaced by the fact of F̂ "
                f"that does): {m.get('eq6_repair_rate')}",
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
