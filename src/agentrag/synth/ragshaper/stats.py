"""RAGShaper's run statistics, streamed over the run's stage files (bounded memory):
the funnel, tool calls per trajectory (Fig. 3), distractor types created and met and success rate
by distractor type met (Fig. 4 right). Each stage file is read once, record by record, into the
counters of :class:`Tally`; no record is held."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentrag.records import Trajectory
from agentrag.synth.common import reason_kind
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    TagRecord,
)


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
        c[reason_kind(reason)] += 1


def distractor_rejection(rejected: str) -> tuple[str, str]:
    """(type, reason kind) of a dropped distractor document (``"<type>: <reason>"``); a decision
    of the verifier is ``verifier: <check>``."""
    dtype, _, reason = rejected.partition(": ")
    parts = reason.split(": ")
    if "verifier" in parts[:-1]:
        return dtype, f"verifier: {parts[parts.index('verifier') + 1]}"
    return dtype, parts[0]


@dataclass
class Tally:
    """The counters the statistics need, read once per stage file, record by record; held per
    item only: each tree's seed and time and each QA's time (``seconds_per_seed`` is part of the
    output: exploration plus the seed's longest QA-check + elicitation chain, so within one run it
    never exceeds ``wall_s``) and each trajectory's keep decision."""

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
    tree_s: dict[str, float] = field(default_factory=dict)  # seed -> its exploration's seconds
    qa_s: dict[str, float] = field(default_factory=dict)  # QA id -> its check's seconds
    chain_s: dict[str, float] = field(default_factory=dict)  # seed -> its longest QA + elicitation chain
    distractors: int = 0
    created: Counter[str] = field(default_factory=Counter)
    #: dropped distractor documents: type -> reason kind -> count
    dropped: dict[str, Counter[str]] = field(default_factory=dict)
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
            t.qa_s[q.id] = q.elapsed
            t._chain(seeds_by_id.get(q.seed_id), q.elapsed)
        kept: dict[str, bool] = {}
        for f in r.filters:
            t.filters += 1
            kept[f.id] = f.kept
            if f.kept:
                t.kept += 1
            else:
                _add(t.filter_rejected, f.reason or "f1_below_threshold")
        t._trajs(r.trajs, seeds_by_id, kept)
        t.per_seed = {seed: round(s + t.chain_s.get(seed, 0.0), 1) for seed, s in t.tree_s.items()}
        if r.tags is not None:
            t.tagged = 0
            for g in r.tags:
                t.tagged += g.error is None
                _add(t.tag_errors, g.error)
                t.tags[g.tag] += 1
                t.rule_tags[g.rule_tag] += 1
        return t

    def _chain(self, seed: str | None, seconds: float) -> None:
        """A seed's paths are checked and elicited side by side: its time is its exploration plus
        its longest path (QA check, then that QA's elicitation), not the sum over its paths."""
        if seed is not None:
            self.chain_s[seed] = max(self.chain_s.get(seed, 0.0), seconds)

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
                for rej in n.rejected:
                    dtype, kind = distractor_rejection(rej)
                    self.dropped.setdefault(dtype, Counter())[kind] += 1
            self.quota[(tree.distractor_calls, docs_per_seed[tree.id])] += 1
            self.tree_s[tree.seed] = tree.elapsed
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
            self._chain(seeds_by_id.get(str(md.get("seed_id"))), self.qa_s.get(str(md.get("qa_id")), 0.0) + tr.elapsed)
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
        return {"created": dict(self.created),
                "rejected": {k: dict(v) for k, v in sorted(self.dropped.items())},
                "met_documents": dict(self.met_docs),
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


__all__ = ["RunRecords", "Tally", "Counts", "stage_counts", "details", "repairs", "tool_calls_distribution",
           "distractor_stats"]
