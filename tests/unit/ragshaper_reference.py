"""The list-based RAGShaper statistics as they were before they streamed (issue 27, part 3): the
reference the streaming code (:mod:`agentrag.synth.ragshaper.analysis`) must equal, key for key and
in the same order (``metrics.json`` byte for byte). Kept as it was, only compacted."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentrag.records import Trajectory
from agentrag.synth.common import reason_counts
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    TagRecord,
)


def repairs(trees: list[InfoTree]) -> dict[str, int]:
    def kind(repair: str) -> str:
        head, _, tail = repair.partition(" -> ")
        words = head.split()
        return f"{' '.join(words[:2])} -> {tail}" if words[:1] == ["empty"] else " ".join(words[:2])

    return dict(Counter(kind(r) for t in trees for n in t.nodes for r in n.repaired))


def stage_counts(seeds: int, trees: list[InfoTree], distractors: list[DistractorDoc], paths: list[PathRecord],
                 qas: list[QARecord], trajs: list[Trajectory], filters: list[FilterRecord],
                 tags: list[TagRecord] | None, export: dict[str, Any]) -> tuple[Any, Any]:
    ok_trees = [t for t in trees if t.status == "ok"]
    accepted = [q for q in qas if q.status == "accepted"]
    node_errors = [n.error for t in trees for n in t.nodes if n.error]
    flagged = [t for t in trajs if str(t.metadata.get("error") or "").startswith("context_limit")]
    kept = sum(f.kept for f in filters)
    malformed = int(export.get("with_malformed_turns", 0))
    reject = export.get("malformed_turns") == "reject"
    counts: dict[str, Any] = {
        "explore": (seeds, len(ok_trees), reason_counts(t.error for t in trees if t.status != "ok")),
        "distractors": (sum(t.distractor_calls for t in trees), len(distractors),
                        reason_counts(e for e in node_errors if e.startswith("distractor_tool"))),
        "paths": (len(ok_trees), len(paths), {}),
        "qa": (len(paths), len(accepted), reason_counts(q.reason for q in qas if q.status != "accepted")),
        "elicit": (len(accepted), len(trajs) - len(flagged), reason_counts(str(t.metadata["error"]) for t in flagged)),
        "filter": (len(filters), kept, reason_counts(f.reason or "f1_below_threshold" for f in filters if not f.kept)),
        "export": (kept, int(export["exported"]) if "exported" in export else (kept - malformed if reject else kept),
                   {"malformed_turns": malformed} if malformed and reject else {}),
    }
    if tags is not None:
        counts["tag"] = (len(trajs), sum(t.error is None for t in tags), reason_counts(t.error for t in tags if t.error))
    notes = {"explore": {"nodes": sum(len(t.nodes) for t in trees), "node_errors": reason_counts(node_errors),
                         "repaired": repairs(trees)},
             "elicit": {"finish_reason": dict(Counter(t.finish_reason for t in trajs))},
             "export": {"policy": export.get("malformed_turns", "reject"), "kept_with_malformed_turns": malformed}}
    return counts, notes


def _rejected(trees: list[InfoTree]) -> dict[str, dict[str, int]]:
    from agentrag.synth.ragshaper.stats import distractor_rejection

    out: dict[str, Counter[str]] = {}
    for t in trees:
        for n in t.nodes:
            for r in n.rejected:
                dtype, kind = distractor_rejection(r)
                out.setdefault(dtype, Counter())[kind] += 1
    return {k: dict(v) for k, v in sorted(out.items())}


def details(trees: list[InfoTree], distractors: list[DistractorDoc], qas: list[QARecord], trajs: list[Trajectory],
            filters: list[FilterRecord], tags: list[TagRecord] | None, cfg: RagShaperConfig, notes: Any,
            seed_source: str = "") -> dict[str, Any]:
    seeds_by_id = {t.id: t.seed for t in trees}
    qa_s = {q.id: q.elapsed for q in qas}
    chains: dict[str, list[float]] = {}
    for q in qas:
        chains.setdefault(seeds_by_id.get(q.seed_id, ""), []).append(q.elapsed)
    for tr in trajs:
        chains.setdefault(seeds_by_id.get(str(tr.metadata.get("seed_id")), ""), []).append(
            qa_s.get(str(tr.metadata.get("qa_id")), 0.0) + tr.elapsed)
    per_seed: dict[str, float] = {t.seed: round(t.elapsed + max(chains.get(t.seed, [0.0])), 1) for t in trees}
    docs_per_seed = Counter(d.seed_id for d in distractors)
    kept = {f.id: f.kept for f in filters}
    met_docs: Counter[str] = Counter()
    by_type: dict[str, list[bool]] = {}
    for tr in trajs:
        for m in tr.metadata.get("distractors_met", []):
            met_docs[m["distractor_type"]] += 1
        for dtype in tr.metadata.get("distractor_types_met", []):
            by_type.setdefault(dtype, []).append(kept.get(tr.id, False))
    none = [kept.get(tr.id, False) for tr in trajs if not tr.metadata.get("distractor_types_met")]
    if none:
        by_type["(none met)"] = none
    return {
        "ablation_no_distractors": not cfg.distractors.enabled, "seed_source": seed_source,
        "funnel_notes": notes, "repaired": repairs(trees),
        "tool_calls": dict(sorted(Counter(int(t.metadata.get("tool_calls", 0)) for t in trajs).items())),
        "distractors": {"created": dict(Counter(d.distractor_type for d in distractors)),
                        "rejected": _rejected(trees),
                        "met_documents": dict(met_docs),
                        "success_by_type_met": {k: {"trajectories": len(v), "kept": sum(v),
                                                    "success_rate": round(sum(v) / len(v), 3)}
                                                for k, v in by_type.items()}},
        "seeds_meeting_distractor_quota": sum(1 for t in trees if t.distractor_calls >= cfg.distractors.min_calls
                                              and docs_per_seed[t.id] >= cfg.distractors.min_docs),
        "tags": dict(Counter(t.tag for t in tags or [])), "tags_rule": dict(Counter(t.rule_tag for t in tags or [])),
        "seconds_per_seed": per_seed,
    }
