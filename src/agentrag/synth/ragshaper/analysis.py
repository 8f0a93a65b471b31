"""Analyses for the run report: the funnel, tool calls per trajectory (Fig. 3), distractor types
created and met, success rate by distractor type met (Fig. 4 right) and behaviour tags by an
LLM tagger (Fig. 4 left)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Trajectory
from agentrag.synth.common import call_json
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    TagRecord,
)

SUCCESS_TAGS = ("handling_success", "direct_answer", "fallback_success")
TAGS = (*SUCCESS_TAGS, "failure")

TAGGER_SYSTEM = (
    "You label the behaviour of a search agent on one question. Pick exactly one label:\n"
    "- handling_success: the answer is correct and the agent met misleading or conflicting "
    "documents (marked [distractor] below) and recognized, checked or set them aside;\n"
    "- direct_answer: the answer is correct and the agent gave it without using retrieval (no "
    "search, or it ignored every result);\n"
    "- fallback_success: the answer is correct although the searches did not yield it: the agent "
    "fell back on its own knowledge;\n"
    "- failure: the answer is wrong or missing.\n"
    "Judge correctness by comparing the agent's answer with the correct answer.\n"
    "Reply with JSON: {\"tag\": ..., \"rationale\": one sentence}.")


def funnel(seeds: int, trees: list[InfoTree], distractors: list[DistractorDoc], paths: list[PathRecord],
           qas: list[QARecord], trajs: list[Trajectory], filters: list[FilterRecord], *,
           unfinished: dict[str, int] | None = None, export: dict[str, Any] | None = None,
           tags: list[TagRecord] | None = None) -> list[dict[str, Any]]:
    """One row per stage: how many records went in and came out, why the rest did not, and how
    many were left unfinished by an outage (redone on rerun)."""
    unfinished = unfinished or {}
    def reasons(items: Sequence[str | None]) -> dict[str, int]:
        return dict(Counter((r or "").split(":")[0] for r in items if r))

    ok_trees = [t for t in trees if t.status == "ok"]
    accepted = [q for q in qas if q.status == "accepted"]
    node_errors = [n.error for t in trees for n in t.nodes if n.error]
    kept = sum(f.kept for f in filters)
    exp = export or {}
    malformed = int(exp.get("with_malformed_turns", 0))
    rows = [
        {"stage": "seeds", "in": seeds, "out": seeds, "rejected": {}},
        {"stage": "trees (explore)", "in": seeds, "out": len(ok_trees),
         "rejected": reasons([t.error for t in trees if t.status != "ok"]),
         "notes": {"nodes": sum(len(t.nodes) for t in trees), "node_errors": reasons(node_errors),
                   "repaired": repairs(trees)}},
        {"stage": "distractor tool calls -> K~ documents", "in": sum(t.distractor_calls for t in trees),
         "out": len(distractors), "rejected": reasons([e for e in node_errors if e.startswith("distractor_tool")])},
        {"stage": "paths (Eq. 5)", "in": len(ok_trees), "out": len(paths), "rejected": {}},
        {"stage": "QA (Eq. 6)", "in": len(paths), "out": len(accepted),
         "rejected": reasons([q.reason for q in qas if q.status != "accepted"])},
        {"stage": "trajectories (Eq. 7-8)", "in": len(accepted), "out": len(trajs),
         "rejected": {}, "notes": {"finish_reason": dict(Counter(t.finish_reason for t in trajs))}},
        {"stage": "filter F1 > threshold", "in": len(filters), "out": kept,
         "rejected": {"f1_below_threshold": sum(not f.kept for f in filters)} if filters else {}},
        {"stage": "SFT export (clean assistant turns)", "in": kept,
         "out": int(exp.get("exported", 0)) if "exported" in exp else
         (kept - malformed if exp.get("malformed_turns") == "reject" else kept),
         "rejected": {"malformed_turns": malformed} if malformed and exp.get("malformed_turns") == "reject" else {},
         "notes": {"policy": exp.get("malformed_turns", "reject"), "kept_with_malformed_turns": malformed}},
    ]
    if tags is not None:
        rows.append({"stage": "behaviour tags (LLM)", "in": len(trajs), "out": sum(t.error is None for t in tags),
                     "rejected": reasons([t.error for t in tags if t.error])})
    keys = {"trees (explore)": "explore", "QA (Eq. 6)": "qa", "trajectories (Eq. 7-8)": "elicit",
            "behaviour tags (LLM)": "tag"}
    for row in rows:
        row["unfinished"] = unfinished.get(keys.get(str(row["stage"]), ""), 0)
    return rows


def repairs(trees: list[InfoTree]) -> dict[str, int]:
    """How often a rule filled in what the curator left out (``TreeNode.repaired``), by kind."""
    def kind(repair: str) -> str:  # "invalid top_k 'x' -> 3" -> "invalid top_k"; empties keep the fallback
        head, _, tail = repair.partition(" -> ")
        words = head.split()
        return f"{' '.join(words[:2])} -> {tail}" if words[:1] == ["empty"] else " ".join(words[:2])

    return dict(Counter(kind(r) for t in trees for n in t.nodes for r in n.repaired))


def tool_calls_distribution(trajs: list[Trajectory]) -> dict[int, int]:
    return dict(sorted(Counter(int(t.metadata.get("tool_calls", 0)) for t in trajs).items()))


def distractor_stats(distractors: list[DistractorDoc], trajs: list[Trajectory],
                     filters: list[FilterRecord]) -> dict[str, Any]:
    kept = {f.id: f.kept for f in filters}
    created = Counter(d.distractor_type for d in distractors)
    met_docs: Counter[str] = Counter()
    by_type: dict[str, list[bool]] = {}
    for t in trajs:
        for m in t.metadata.get("distractors_met", []):
            met_docs[m["distractor_type"]] += 1
        for dtype in t.metadata.get("distractor_types_met", []):
            by_type.setdefault(dtype, []).append(kept.get(t.id, False))
    none = [kept.get(t.id, False) for t in trajs if not t.metadata.get("distractor_types_met")]
    if none:
        by_type["(none met)"] = none
    return {"created": dict(created), "met_documents": dict(met_docs),
            "success_by_type_met": {k: {"trajectories": len(v), "kept": sum(v),
                                        "success_rate": round(sum(v) / len(v), 3)} for k, v in by_type.items()}}


def render_for_tagger(traj: Trajectory, max_chars: int = 300) -> str:
    met = {(m["step"], m["id"]) for m in traj.metadata.get("distractors_met", [])}
    lines = [f"Question: {traj.question}", f"Correct answer: {traj.metadata.get('gold_answer', '')}"]
    for i, s in enumerate(traj.steps, start=1):
        if s.thought:
            lines.append(f"Thought {i}: {s.thought[:max_chars]}")
        if s.action is not None:
            lines.append(f"Search {i}: {s.action.arguments.get('query', '')}")
            for h in s.hits:
                tag = "[distractor] " if (i, h.id) in met else ""
                lines.append(f"  {tag}{h.title}: {h.text[:max_chars]}")
    lines.append(f"Agent's answer: {traj.answer}")
    return "\n".join(lines)


def rule_tag(traj: Trajectory, filt: FilterRecord) -> str:
    """The rule-based view of Fig. 4 (left), kept beside the LLM tag: ``failure`` when dropped;
    ``direct_answer`` without a search; ``fallback_success`` when no retrieved document contains
    the answer; ``handling_success`` when K~ documents were met; ``retrieval_success`` (a
    rule-only label) otherwise."""
    if not filt.kept:
        return "failure"
    if not any(s.action is not None for s in traj.steps):
        return "direct_answer"
    gold = " ".join(str(traj.metadata.get("gold_answer") or filt.answer).lower().split())
    seen = " ".join(" ".join(h.text.lower().split()) for s in traj.steps for h in s.hits)
    if gold and gold not in seen:
        return "fallback_success"
    return "handling_success" if traj.metadata.get("distractors_met") else "retrieval_success"


def tag_behaviour(llm: LLM | None, traj: Trajectory, filt: FilterRecord, seed: int = 0) -> TagRecord:
    """The LLM tagger's label (one of :data:`TAGS`) for any trajectory, kept or dropped, with the
    rule-based label beside it. A model failure is recorded in ``error``; an outage raises."""
    rule = rule_tag(traj, filt)
    if llm is None:
        return TagRecord(id=traj.id, tag="untagged", rule_tag=rule, error="no tagger LLM",
                         provenance=Provenance(stage="tag", model="none"))
    schema = {"type": "object", "properties": {"tag": {"type": "string", "enum": list(TAGS)},
                                               "rationale": {"type": "string", "maxLength": 200}},
              "required": ["tag", "rationale"]}
    messages = [Message(role="system", content=TAGGER_SYSTEM), Message(role="user", content=render_for_tagger(traj))]
    obj, prov, err = call_json(llm, messages, schema, name="behaviour_tag", stage="tag", max_tokens=128,
                               temperature=0.0, seed=seed, raise_retryable=True)
    tag = str((obj or {}).get("tag") or "")
    if err or tag not in TAGS:
        return TagRecord(id=traj.id, tag="untagged", rule_tag=rule, error=err or f"invalid tag {tag!r}",
                         provenance=prov)
    return TagRecord(id=traj.id, tag=tag, rule_tag=rule, rationale=str((obj or {}).get("rationale") or ""),
                     provenance=prov)


def report_sections(metrics: dict[str, Any]) -> list[Any]:
    """The run report as :class:`agentrag.report.Section` objects (Markdown + HTML)."""
    from agentrag.render import Section, bar_chart_svg

    funnel_rows = [[r["stage"], r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-",
                    r.get("unfinished", 0)] for r in metrics["funnel"]]
    notes = "; ".join(f"{r['stage']}: {r['notes']}" for r in metrics["funnel"] if r.get("notes"))
    tool_calls = {str(k): v for k, v in metrics["tool_calls"].items()}
    d = metrics["distractors"]
    types = sorted(set(d["created"]) | set(d["met_documents"]))
    return [
        Section(title="Funnel", text=notes, headers=["stage", "in", "out", "rejected (reason: count)",
                                                      "unfinished (outage)"],
                rows=funnel_rows),
        Section(title="Tool calls per trajectory", headers=["tool calls", "trajectories"],
                rows=[[k, v] for k, v in tool_calls.items()],
                svg=bar_chart_svg(tool_calls, x_label="tool calls", y_label="trajectories") if tool_calls else "",
                caption="cf. the paper's Fig. 3"),
        Section(title="Distractors",
                text=(f"navigation: {'plain (ablation, no K~)' if metrics.get('ablation_no_distractors') else 'constrained (Eq. 8)'}; "
                      f"seeds meeting the distractor quota: {metrics.get('seeds_meeting_distractor_quota', 0)}"),
                headers=["type", "documents created", "documents met by the teacher"],
                rows=[[t, d["created"].get(t, 0), d["met_documents"].get(t, 0)] for t in types]),
        Section(title="Success rate by distractor type met", headers=["type met", "trajectories", "kept", "rate"],
                rows=[[t, v["trajectories"], v["kept"], v["success_rate"]]
                      for t, v in d["success_by_type_met"].items()], caption="cf. the paper's Fig. 4 (right)"),
        Section(title="Behaviour tags", headers=["tag", "LLM tagger", "rule-based"],
                rows=[[k, metrics["tags"].get(k, 0), metrics.get("tags_rule", {}).get(k, 0)]
                      for k in dict.fromkeys([*TAGS, *metrics["tags"], *metrics.get("tags_rule", {})])],
                caption="cf. the paper's Fig. 4 (left); every trajectory, kept and dropped"),
        Section(title="Timing and export",
                text=(f"wall time per seed (exploration + QA + elicitation, s): {metrics.get('seconds_per_seed', {})}; "
                      f"total wall time: {metrics.get('elapsed', 0)} s; export: {metrics.get('export')}")),
    ]


__all__ = ["funnel", "tool_calls_distribution", "distractor_stats", "tag_behaviour", "render_for_tagger",
           "report_sections", "TAGS", "SUCCESS_TAGS", "rule_tag", "repairs"]
