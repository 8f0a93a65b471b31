"""Analyses for the run report: behaviour tags by an LLM tagger (Fig. 4 left) and the report's
sections; the statistics (the funnel, Fig. 3, Fig. 4 right) stream in :mod:`.stats` and are
re-exported here (the pipeline calls ``analysis.stage_counts`` and ``analysis.details``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Trajectory
from agentrag.synth.common import call_json
from agentrag.synth.ragshaper.schema import FilterRecord, TagRecord
from agentrag.synth.ragshaper.stats import (
    Counts,
    RunRecords,
    Tally,
    details,
    distractor_stats,
    repairs,
    stage_counts,
    tool_calls_distribution,
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
    rejected = d.get("rejected", {})
    types = sorted(set(d["created"]) | set(d["met_documents"]) | set(rejected))
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
                headers=["type", "documents kept", "documents rejected (reason: count)",
                         "documents met by the teacher"],
                rows=[[t, d["created"].get(t, 0),
                       ", ".join(f"{k}: {v}" for k, v in rejected.get(t, {}).items()) or "-",
                       d["met_documents"].get(t, 0)] for t in types]),
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


__all__ = ["RunRecords", "Tally", "Counts", "stage_counts", "details", "tool_calls_distribution", "distractor_stats", "tag_behaviour",
           "render_for_tagger", "report_sections", "TAGS", "SUCCESS_TAGS", "rule_tag", "repairs", "BehaviourTag"]
