"""Analyses for the run report: the funnel, tool calls per trajectory (Fig. 3), distractor types
created and met, success rate by distractor type met (Fig. 4 right) and behaviour tags by an
LLM tagger (Fig. 4 left)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Trajectory
from agentrag.synth.common import call_json
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
    """A run's stage records for the statistics: re-iterables (a run's
    :class:`~agentrag.runs.JsonlStore`, read record by record once per pass, or lists). Their
    counters (:class:`Tally`) are computed on first use, one pass over each source."""

    seeds: int
    trees: Iterable[InfoTree]
    distractors: Iterable[DistractorDoc]
    paths: Iterable[PathRecord]
    qas: Iterable[QARecord]
    trajs: Iterable[Trajectory]
    filters: Iterable[FilterRecord]
    tags: Iterable[TagRecord] | None = None
    _tally: Tally | None = field(default=None, init=False, repr=False)

    def tally(self) -> Tally:
        if self._tally is None:
            self._tally = Tally.of(self)
        return self._tally


def _add(c: Counter[str], reason: str | None) -> None:
    """One reason into ``c`` by kind (what :func:`agentrag.synth.common.reason_counts` counts)."""
    if reason:
        c[reason.split(":")[0]] += 1


@dataclass
class Tally:
    """The counters the statistics need, read once per stage file, record by record; held per
    item only: each tree's seed and time (``seconds_per_seed`` is part of the output) and each
    trajectory's keep decision."""

    seeds: int = 0
    trees: int = 0
    ok_trees: int = 0
    tree_errors: Counter[str] = field(default_factory=Counter)
    distractor_calls: int = 0
    nodes: int = 0
    node_errors: Counter[str] = field(default_factory=Counter)
    tool_errors: Counter[str] = field(default_factory=Counter)
    repaired: Counter[str] = field(default_factory=Counter)
    quota: Counter[tuple[int, int]] = field(default_factory=Counter)  # (distractor calls, documents) per tree
    per_seed: dict[str, float] = field(default_factory=dict)
    distractors: int = 0
    created: Counter[str] = field(default_factory=Counter)
    paths: int = 0
    accepted: int = 0
    qa_rejected: Counter[str] = field(default_factory=Counter)
    trajs: int = 0
    flagged: int = 0
    flag_reasons: Counter[str] = field(default_factory=Counter)
    finish: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[int] = field(default_factory=Counter)
    met_docs: Counter[str] = field(default_factory=Counter)
    by_type: dict[str, list[int]] = field(default_factory=dict)  # type met -> [trajectories, kept]
    filters: int = 0
    kept: int = 0
    filter_rejected: Counter[str] = field(default_factory=Counter)
    tagged: int | None = None
    tag_errors: Counter[str] = field(default_factory=Counter)
    tags: Counter[str] = field(default_factory=Counter)
    rule_tags: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, r: RunRecords) -> Tally:
        t = cls(seeds=r.seeds)
        docs_per_seed: Counter[str] = Counter()
        for d in r.distractors:
            t.distractors += 1
            t.created[d.distractor_type] += 1
            docs_per_seed[d.seed_id] += 1
        seeds_by_id = t._trees(r.trees, docs_per_seed)
        del docs_per_seed
        for _ in r.paths:
            t.paths += 1
        for q in r.qas:
            if q.status == "accepted":
                t.accepted += 1
            else:
                _add(t.qa_rejected, q.reason)
            t._time(seeds_by_id.get(q.seed_id), q.elapsed)
        kept: dict[str, bool] = {}
        for f in r.filters:
            t.filters += 1
            kept[f.id] = f.kept
            if f.kept:
                t.kept += 1
            else:
                _add(t.filter_rejected, f.reason or "f1_below_threshold")
        t._trajs(r.trajs, seeds_by_id, kept)
        if r.tags is not None:
            t.tagged = 0
            for g in r.tags:
                t.tagged += g.error is None
                _add(t.tag_errors, g.error)
                t.tags[g.tag] += 1
                t.rule_tags[g.rule_tag] += 1
        return t

    def _time(self, seed: str | None, elapsed: float) -> None:
        if seed is not None:
            self.per_seed[seed] = round(self.per_seed.get(seed, 0) + elapsed, 1)

    def _trees(self, trees: Iterable[InfoTree], docs_per_seed: Counter[str]) -> dict[str, str]:
        seeds_by_id: dict[str, str] = {}
        for tree in trees:
            self.trees += 1
            if tree.status == "ok":
                self.ok_trees += 1
            else:
                _add(self.tree_errors, tree.error)
            self.distractor_calls += tree.distractor_calls
            self.nodes += len(tree.nodes)
            for n in tree.nodes:
                if n.error:
                    _add(self.node_errors, n.error)
                    if n.error.startswith("distractor_tool"):
                        _add(self.tool_errors, n.error)
                for rep in n.repaired:
                    self.repaired[_repair_kind(rep)] += 1
            self.quota[(tree.distractor_calls, docs_per_seed[tree.id])] += 1
            self.per_seed[tree.seed] = round(tree.elapsed, 1)
            seeds_by_id[tree.id] = tree.seed
        return seeds_by_id

    def _trajs(self, trajs: Iterable[Trajectory], seeds_by_id: dict[str, str], kept: dict[str, bool]) -> None:
        none = [0, 0]
        for tr in trajs:
            self.trajs += 1
            md = tr.metadata
            if str(md.get("error") or "").startswith("context_limit"):
                self.flagged += 1
                _add(self.flag_reasons, str(md["error"]))
            self.finish[tr.finish_reason] += 1
            self.tool_calls[int(md.get("tool_calls", 0))] += 1
            self._time(seeds_by_id.get(str(md.get("seed_id"))), tr.elapsed)
            for m in md.get("distractors_met", []):
                self.met_docs[m["distractor_type"]] += 1
            ok = kept.get(tr.id, False)
            types = md.get("distractor_types_met", [])
            for dtype in types:
                row = self.by_type.setdefault(dtype, [0, 0])
                row[0] += 1
                row[1] += ok
            if not types:
                none[0] += 1
                none[1] += ok
        if none[0]:
            self.by_type["(none met)"] = none

    def distractor_block(self) -> dict[str, Any]:
        """Types created, documents met by type, and success by type met (Fig. 4 right)."""
        return {"created": dict(self.created), "met_documents": dict(self.met_docs),
                "success_by_type_met": {k: {"trajectories": n, "kept": kept, "success_rate": round(kept / n, 3)}
                                        for k, (n, kept) in self.by_type.items()}}


Counts = dict[str, tuple[int, int, Mapping[str, int]]]


def stage_counts(r: RunRecords, export: dict[str, Any] | None = None) -> tuple[Counts, dict[str, dict[str, Any]]]:
    """Per declared stage (see :class:`agentrag.synth.ragshaper.run.RagShaperSynth`): records in,
    records out and rejections by reason; and the notes beside the funnel (per stage). The driver
    adds the items each stage left unfinished."""
    t = r.tally()
    exp = export or {}
    malformed = int(exp.get("with_malformed_turns", 0))
    reject = exp.get("malformed_turns") == "reject"
    counts: Counts = {
        "explore": (t.seeds, t.ok_trees, dict(t.tree_errors)),
        "distractors": (t.distractor_calls, t.distractors, dict(t.tool_errors)),
        "paths": (t.ok_trees, t.paths, {}),
        "qa": (t.paths, t.accepted, dict(t.qa_rejected)),
        "elicit": (t.accepted, t.trajs - t.flagged, dict(t.flag_reasons)),
        "filter": (t.filters, t.kept, dict(t.filter_rejected)),
        "export": (t.kept, int(exp["exported"]) if "exported" in exp else (t.kept - malformed if reject else t.kept),
                   {"malformed_turns": malformed} if malformed and reject else {}),
    }
    if t.tagged is not None:
        counts["tag"] = (t.trajs, t.tagged, dict(t.tag_errors))
    notes: dict[str, dict[str, Any]] = {
        "explore": {"nodes": t.nodes, "node_errors": dict(t.node_errors), "repaired": dict(t.repaired)},
        "elicit": {"finish_reason": dict(t.finish)},
        "export": {"policy": exp.get("malformed_turns", "reject"), "kept_with_malformed_turns": malformed},
    }
    return counts, notes


def details(r: RunRecords, cfg: RagShaperConfig, notes: dict[str, dict[str, Any]],
            seed_source: str = "") -> dict[str, Any]:
    """RAGShaper's own statistics, written beside the driver's keys in ``metrics.json``."""
    t = r.tally()
    dcfg = cfg.distractors
    return {
        "ablation_no_distractors": not dcfg.enabled, "seed_source": seed_source,
        "funnel_notes": notes, "repaired": dict(t.repaired),
        "tool_calls": dict(sorted(t.tool_calls.items())),
        "distractors": t.distractor_block(),
        "seeds_meeting_distractor_quota": sum(  # (calls, documents) per tree counted in one pass
            c for (calls, docs), c in t.quota.items() if calls >= dcfg.min_calls and docs >= dcfg.min_docs),
        "tags": dict(t.tags), "tags_rule": dict(t.rule_tags),
        "seconds_per_seed": dict(t.per_seed),
    }


def _repair_kind(repair: str) -> str:
    """"invalid top_k 'x' -> 3" -> "invalid top_k"; empties keep the fallback."""
    head, _, tail = repair.partition(" -> ")
    words = head.split()
    return f"{' '.join(words[:2])} -> {tail}" if words[:1] == ["empty"] else " ".join(words[:2])


def repairs(trees: Iterable[InfoTree]) -> dict[str, int]:
    """How often a rule filled in what the curator left out (``TreeNode.repaired``), by kind."""
    return dict(Counter(_repair_kind(r) for t in trees for n in t.nodes for r in n.repaired))


def tool_calls_distribution(trajs: Iterable[Trajectory]) -> dict[int, int]:
    return dict(sorted(Counter(int(t.metadata.get("tool_calls", 0)) for t in trajs).items()))


def distractor_stats(distractors: Iterable[DistractorDoc], trajs: Iterable[Trajectory],
                     filters: Iterable[FilterRecord]) -> dict[str, Any]:
    """The distractor block of the statistics (types created, met, success by type met)."""
    t = Tally()
    for d in distractors:
        t.created[d.distractor_type] += 1
    t._trajs(trajs, {}, {f.id: f.kept for f in filters})
    return t.distractor_block()


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


__all__ = ["RunRecords", "Tally", "stage_counts", "details", "tool_calls_distribution", "distractor_stats", "tag_behaviour",
           "render_for_tagger", "report_sections", "TAGS", "SUCCESS_TAGS", "rule_tag", "repairs", "BehaviourTag"]
