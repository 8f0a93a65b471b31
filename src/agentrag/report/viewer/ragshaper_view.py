"""RAGShaper runs: one row per seed; its InfoCurator tree (action, intent, observation and the
documents of every node, distractor documents coloured by type, the Eq. 5 paths highlighted), the
QA synthesized on each path and the teacher's trajectory with the K~ documents it met, the filter
verdict and the behaviour tag. The run's funnel heads the page."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from agentrag.records import Trajectory
from agentrag.report.viewer.common import (
    DocTable,
    Limits,
    Payload,
    col,
    display_name,
    failures_filter,
    funnel_table,
    read_config,
    read_grouped,
    read_json,
    read_stage,
    select_filter,
)
from agentrag.report.viewer.header import failure_help
from agentrag.report.viewer.trajectory import trajectory_detail
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    SeedRecord,
    TagRecord,
)

COLUMNS = [col("id", "seed id"), col("seed", "seed entity"), col("status", "tree"), col("nodes", "nodes", "num"),
           col("distractors", "K~ docs", "num"), col("paths", "paths", "num"), col("accepted", "QA accepted", "num"),
           col("rejected", "QA rejected", "num"), col("kept", "trajectories kept", "num"), col("ok", "ok", "bool")]


def _nodes(tree: InfoTree, paths: list[PathRecord], docs: DocTable, limits: Limits) -> list[dict[str, Any]]:
    on_paths: dict[str, list[int]] = defaultdict(list)
    for p in paths:
        for nid in p.node_ids:
            on_paths[nid].append(p.rank)
    out = []
    for n in tree.nodes:
        node: dict[str, Any] = {
            "id": n.id, "parent": n.parent, "depth": n.depth, "intent": n.intent, "obs": limits.clip(n.observation),
            "docs": [[docs.add(d.id, d.title, d.text, d.kb, d.distractor_type),
                      None if d.score is None else round(d.score, 4)] for d in n.docs],
            "dtype": next((d.distractor_type for d in n.docs if d.distractor_type), None),
            "paths": on_paths.get(n.id, []), "err": n.error, "repaired": n.repaired}
        if n.action is not None:
            node["tool"] = n.action.name
            node["args"] = limits.clip(json.dumps(n.action.arguments, ensure_ascii=False))
        out.append(node)
    return out


def ragshaper_payload(run_dir: Path, limits: Limits) -> Payload:
    seeds = read_stage(run_dir, "seeds", SeedRecord)
    trees = {t.id: t for t in read_stage(run_dir, "trees", InfoTree)}
    distractors = read_stage(run_dir, "distractors", DistractorDoc)
    paths = read_grouped(run_dir, "paths", PathRecord, lambda rec: rec.seed_id)
    qas = read_grouped(run_dir, "qa", QARecord, lambda q: q.seed_id)
    trajs = {str(t.metadata.get("qa_id")): t for t in read_stage(run_dir, "trajectories", Trajectory)}
    filters = {f.id: f for f in read_stage(run_dir, "filter", FilterRecord)}
    tags = {t.id: t for t in read_stage(run_dir, "tags", TagRecord)}
    types = {d.id: d.distractor_type for d in distractors}
    by_seed: dict[str, int] = defaultdict(int)
    for d in distractors:
        by_seed[d.seed_id] += 1
    metrics = read_json(run_dir, "metrics.json")
    config = read_config(run_dir)
    docs = DocTable()
    p = Payload(kind="ragshaper", title=f"RAGShaper run {display_name(run_dir)}", columns=COLUMNS, docs=docs,
                limits=limits, filters=[failures_filter(), select_filter("status", "tree status")])
    funnel = funnel_table(metrics)
    if funnel:
        p.summary.append(funnel)
    for seed in seeds:
        tree = trees.get(seed.id)
        seed_paths = sorted(paths.get(seed.id, []), key=lambda x: x.rank)
        items: list[dict[str, Any]] = []
        for q in qas.get(seed.id, []):
            traj, filt, tag = trajs.get(q.id), filters.get(f"{q.id}-t"), tags.get(f"{q.id}-t")
            items.append({
                "id": q.id, "path": q.path_id, "status": q.status, "reason": q.reason, "question": q.question,
                "raw": limits.clip(q.provenance.raw_output) if q.status != "accepted" else None,
                "help": failure_help(q.reason, config) if q.status != "accepted" else None,
                "answer": q.answer, "reasoning": [limits.clip(json.dumps(s, ensure_ascii=False)) for s in q.reasoning_steps],
                "filter": None if filt is None else {"f1": filt.f1, "kept": filt.kept, "prediction": filt.prediction,
                                                     "reason": filt.reason},
                "tag": None if tag is None else {"tag": tag.tag, "rule": tag.rule_tag, "why": tag.rationale},
                "traj": None if traj is None else trajectory_detail(traj, docs, limits, golds=[q.answer],
                                                                    types_by_id=types)})
        accepted = sum(q.status == "accepted" for q in qas.get(seed.id, []))
        kept = sum(1 for it in items if it["filter"] and it["filter"]["kept"])
        status = "pending" if tree is None else tree.status
        detail = {"seed": seed.entity, "status": status, "error": tree.error if tree else None,
                  "nodes": _nodes(tree, seed_paths, docs, limits) if tree else [],
                  "paths": [{"id": x.id, "rank": x.rank, "score": x.score, "nodes": x.node_ids} for x in seed_paths],
                  "qa": items, "distractor_calls": tree.distractor_calls if tree else 0}
        ok = status == "ok" and accepted == len(items) and kept == sum(1 for it in items if it["traj"]) and kept > 0
        p.add({"id": seed.id, "seed": seed.entity, "status": status, "nodes": len(tree.nodes) if tree else 0,
               "distractors": by_seed.get(seed.id, 0), "paths": len(seed_paths), "accepted": accepted,
               "rejected": len(items) - accepted, "kept": kept, "ok": ok}, detail)
    return p


__all__ = ["ragshaper_payload"]
