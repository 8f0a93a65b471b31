"""Analyses for the run report: the funnel, tool calls per trajectory (Fig. 3), distractor types
created and met, success rate by distractor type met (Fig. 4 right) and behaviour tags by an
LLM tagger (Fig. 4 left)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Trajectory
from agentrag.synth.common import call_json, reason_counts
from agentrag.synth.ragshaper.config import RagShaperConfig
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


@dataclass
class RunRecords:
    """Every record of a run's stages (read back once for the statistics)."""

    seeds: int
    trees: list[InfoTree]
    distractors: list[DistractorDoc]
    paths: list[PathRecord]
    qas: list[QARecord]
    trajs: list[Trajectory]
    filters: list[FilterRecord]
    tags: list[TagRecord] | None = None


Counts = dict[str, tuple[int, int, Mapping[str, int]]]


def stage_counts(r: RunRecords, export: dict[str, Any] | None = None) -> tuple[Counts, dict[str, dict[str, Any]]]:
    """Per declared stage (see :class:`agentrag.synth.ragshaper.run.RagShaperSynth`): records in,
    records out and rejections by reason; and the notes beside the funnel (per stage). The driver
    adds the items each stage left unfinished."""
    ok_trees = [t for t in r.trees if t.status == "ok"]
    accepted = [q for q in r.qas if q.status == "accepted"]
    node_errors = [n.error for t in r.trees for n in t.nodes if n.error]
    flagged = [t for t in r.trajs if str(t.metadata.get("error") or "").startswith("context_limit")]
    kept = sum(f.kept for f in r.filters)
    exp = export or {}
    malformed = int(exp.get("with_malformed_turns", 0))
    reject = exp.get("malformed_turns") == "reject"
    counts: Counts = {
        "explore": (r.seeds, len(ok_trees), reason_counts(t.error for t in r.trees if t.status != "ok")),
        "distractors": (sum(t.distractor_calls for t in r.trees), len(r.distractors),
                        reason_counts(e for e in node_errors if e.startswith("distractor_tool"))),
        "paths": (len(ok_trees), len(r.paths), {}),
        "qa": (len(r.paths), len(accepted), reason_counts(q.reason for q in r.qas if q.status != "accepted")),
        "elicit": (len(accepted), len(r.trajs) - len(flagged),
                   reason_counts(str(t.metadata["error"]) for t in flagged)),
        "filter": (len(r.filters), kept, reason_counts(f.reason or "f1_below_threshold" for f in r.filters
                                                      if not f.kept)),
        "export": (kept, int(exp["exported"]) if "exported" in exp else (kept - malformed if reject else kept),
                   {"malformed_turns": malformed} if malformed and reject else {}),
    }
    if r.tags is not None:
        counts["tag"] = (len(r.trajs), sum(t.error is None for t in r.tags),
                         reason_counts(t.error for t in r.tags if t.error))
    notes: dict[str, dict[str, Any]] = {
        "explore": {"nodes": sum(len(t.nodes) for t in r.trees), "node_errors": reason_counts(node_errors),
                    "repaired": repairs(r.trees)},
        "elicit": {"finish_reason": dict(Counter(t.finish_reason for t in r.trajs))},
        "export": {"policy": exp.get("malformed_turns", "reject"), "kept_with_malformed_turns": malformed},
    }
    return counts, notes


def details(r: RunRecords, cfg: RagShaperConfig, notes: dict[str, dict[str, Any]],
            seed_source: str = "") -> dict[str, Any]:
    """RAGShaper's own statistics, written beside the driver's keys in ``metrics.json``."""
    per_seed: dict[str, float] = {t.seed: round(t.elapsed, 1) for t in r.trees}
    seeds_by_id = {t.id: t.seed for t in r.trees}
    for q in r.qas:
        s = seeds_by_id.get(q.seed_id)
        if s is not None:
            per_seed[s] = round(per_seed.get(s, 0) + q.elapsed, 1)
    for t in r.trajs:
        s = seeds_by_id.get(str(t.metadata.get("seed_id")))
        if s is not None:
            per_seed[s] = round(per_seed.get(s, 0) + t.elapsed, 1)
    tags = r.tags or []
    docs_per_seed = Counter(d.seed_id for d in r.distractors)
    return {
        "ablation_no_distractors": not cfg.distractors.enabled, "seed_source": seed_source,
        "funnel_notes": notes, "repaired": repairs(r.trees),
        "tool_calls": tool_calls_distribution(r.trajs),
        "distractors": distractor_stats(r.distractors, r.trajs, r.filters),
        "seeds_meeting_distractor_quota": sum(  # documents per tree counted in one pass (was per tree)
            1 for t in r.trees if t.distractor_calls >= cfg.distractors.min_calls
            and docs_per_seed[t.id] >= cfg.distractors.min_docs),
        "tags": dict(Counter(t.tag for t in tags)), "tags_rule": dict(Counter(t.rule_tag for t in tags)),
        "seconds_per_seed": per_seed,
    }


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


class BehaviourTag(BaseModel):
    """The tagger's reply: one label of :data:`TAGS` and a one-sentence rationale."""

    tag: Literal["handling_success", "direct_answer", "fallback_success", "failure"]
    rationale: str = Field(default="", max_length=200)


def tag_behaviour(llm: LLM | None, traj: Trajectory, filt: FilterRecord, seed: int = 0) -> TagRecord:
    """The LLM tagger's label (one of :data:`TAGS`) for any trajectory, kept or dropped, with the
    rule-based label beside it. Output that is not a valid tag (or a request over the context
    window) is recorded in ``error``; every other LLM failure raises (the failure policy)."""
    rule = rule_tag(traj, filt)
    if llm is None:
        return TagRecord(id=traj.id, tag="untagged", rule_tag=rule, error="no tagger LLM",
                         provenance=Provenance(stage="tag", model="none"))
    messages = [Message(role="system", content=TAGGER_SYSTEM), Message(role="user", content=render_for_tagger(traj))]
    obj, prov, err = call_json(llm, messages, BehaviourTag, name="behaviour_tag", stage="tag", max_tokens=128,
                               temperature=0.0, seed=seed)
    if obj is None:
        return TagRecord(id=traj.id, tag="untagged", rule_tag=rule, error=err or "no output", provenance=prov)
    return TagRecord(id=traj.id, tag=obj.tag, rule_tag=rule, rationale=obj.rationale, provenance=prov)


def _llm_rows(llm: dict[str, dict[str, Any]]) -> list[list[Any]]:
    keys = ("hits", "misses", "prompt_tokens", "completion_tokens")
    return [[roles, st.get("inner_calls", st.get("calls", "-")), *(st.get(k, "-") for k in keys)]
            for roles, st in llm.items()]


def report_sections(metrics: dict[str, Any]) -> list[Any]:
    """The run report as :class:`agentrag.render.Section` objects (Markdown + HTML), from the
    driver's ``metrics.json`` (typed funnel and LLM block, RAGShaper's statistics beside them)."""
    from agentrag.render import Section, bar_chart_svg

    funnel_rows = [[f"{r['stage']} ({r.get('input', '')} -> {r.get('output', '')})", r["in"], r["out"],
                    ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-", r.get("unfinished", 0)]
                   for r in metrics["funnel"]]
    notes = "; ".join(f"{k}: {v}" for k, v in metrics.get("funnel_notes", {}).items())
    tool_calls = {str(k): v for k, v in metrics["tool_calls"].items()}
    d = metrics["distractors"]
    types = sorted(set(d["created"]) | set(d["met_documents"]))
    unfinished = metrics.get("unfinished", 0)
    return [
        Section(title="Funnel", text=notes + (f"; unfinished (outage, lost worker or bug; rerun to finish): "
                                              f"{metrics.get('unfinished_by_stage')}" if unfinished else ""),
                headers=["stage", "in", "out", "rejected (reason: count)", "unfinished"], rows=funnel_rows),
        Section(title="LLM usage", headers=["roles", "backend calls", "cache hits", "cache misses", "prompt tokens",
                                            "completion tokens"], rows=_llm_rows(metrics.get("llm", {}))),
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
                      f"total wall time: {metrics.get('wall_s', 0)} s; export: {metrics.get('export')}")),
    ]


__all__ = ["RunRecords", "stage_counts", "details", "tool_calls_distribution", "distractor_stats", "tag_behaviour",
           "render_for_tagger", "report_sections", "TAGS", "SUCCESS_TAGS", "rule_tag", "repairs", "BehaviourTag"]
