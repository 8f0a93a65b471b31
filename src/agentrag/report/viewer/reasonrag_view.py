"""ReasonRAG runs: one row per question; its MCTS tree with Q (Eq. 1 at the search's alpha), N and
the stage of every node, the answer leaves scored against the gold answers, the pruned branches,
and at each fork the preference pairs built there with their ΔQ (Eq. 1 at alpha_label). A
question still being searched is shown as the replay of its events so far."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.eval.metrics import em, f1
from agentrag.records import PreferencePair, QAItem, Trajectory
from agentrag.report.viewer.common import (
    Limits,
    Payload,
    col,
    display_name,
    failures_filter,
    metric_rows,
    read_config,
    read_grouped,
    read_json,
    read_stage,
    select_filter,
    table,
)
from agentrag.synth.reasonrag.config import ValueConfig
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree, pruned

COLUMNS = [col("id", "question id"), col("question", "question"), col("status", "search"),
           col("iterations", "iterations", "num"), col("nodes", "nodes", "num"), col("leaves", "answer leaves", "num"),
           col("correct", "correct leaves", "num"), col("pairs", "pairs", "num"), col("greedy", "greedy F1", "num"),
           col("ok", "correct leaf", "bool")]


def _alphas(run_dir: Path) -> tuple[float, float]:
    value = ValueConfig.model_validate(read_config(run_dir).get("value") or {})
    return value.search_alpha, value.label_alpha


def _nodes(tree: SearchTree, alpha: float, limits: Limits) -> list[dict[str, Any]]:
    drop = pruned(tree)
    by_id = tree.by_id()
    out = []
    for n in tree.nodes:
        parent = by_id.get(n.parent) if n.parent else None
        # query and documents are state carried down the branch: shown where they change
        query = n.query if parent is None or n.query != parent.query else ""
        docs = n.documents if parent is None or n.documents != parent.documents else ""
        out.append({"id": n.id, "parent": n.parent, "depth": n.depth, "action": n.action, "stage": n.stage,
                    "q": round(n.q(alpha), 4), "n": n.N, "response": limits.clip(n.response), "query": query,
                    "answer": n.answer, "correct": None if not n.answer else em(n.answer, tree.golden_answers) >= 1,
                    "flag": n.flag, "pruned": n.id in drop, "estimates": len(n.estimates), "forced": n.forced,
                    "docs": limits.clip(docs) if docs else ""})
    return out


def reasonrag_payload(run_dir: Path, limits: Limits) -> Payload:
    questions = read_stage(run_dir, "questions", QAItem)
    trees = {t.id: t for t in read_stage(run_dir, "trees", SearchTree)}
    events = read_grouped(run_dir, "events", IterationEvent, lambda ev: ev.question_id)
    pairs = read_grouped(run_dir, "pairs", PreferencePair, lambda pr: pr.metadata.get("question_id"))
    greedy = {t.id: t for t in read_stage(run_dir, "greedy", Trajectory)}
    alpha, alpha_label = _alphas(run_dir)
    metrics = read_json(run_dir, "metrics.json")
    p = Payload(kind="reasonrag", title=f"ReasonRAG run {display_name(run_dir)}", columns=COLUMNS, limits=limits,
                filters=[failures_filter("no correct leaf only"), select_filter("status", "search status")])
    scalars = [["alpha (search, node Q)", alpha], ["alpha (pair labels, ΔQ)", alpha_label],
               *metric_rows(metrics, ("value", "questions", "pairs", "unfinished", "wall_s"))]
    p.summary.append(table("Run", ["setting", "value"], scalars))
    for q in questions:
        tree = trees.get(q.id)
        status = tree.status if tree else "searching"
        if tree is None:
            tree = SearchTree.replay(q.id, q.question, q.golden_answers, events.get(q.id, []))
        leaves = tree.answer_leaves()
        correct = sum(em(n.answer, q.golden_answers) >= 1 for n in leaves)
        g = greedy.get(q.id)
        greedy_f1 = None if g is None else round(f1(g.answer, q.golden_answers), 3)
        qpairs = [{"parent": pr.metadata.get("parent_id"), "chosen": pr.metadata.get("chosen_id"),
                   "rejected": pr.metadata.get("rejected_id"), "type": pr.metadata.get("type"),
                   "chosen_q": pr.metadata.get("chosen_value"), "rejected_q": pr.metadata.get("rejected_value"),
                   "gap": pr.metadata.get("gap")} for pr in pairs.get(q.id, [])]
        detail = {"question": q.question, "golds": q.golden_answers, "status": status, "iterations": tree.iterations,
                  "alpha": alpha, "alpha_label": alpha_label,
                  "nodes": _nodes(tree, alpha, limits), "pairs": qpairs,
                  "greedy": None if g is None else {"answer": g.answer, "f1": greedy_f1, "finish": g.finish_reason}}
        p.add({"id": q.id, "question": q.question[:200], "status": status, "iterations": tree.iterations,
               "nodes": len(tree.nodes), "leaves": len(leaves), "correct": correct, "pairs": len(qpairs),
               "greedy": greedy_f1, "ok": correct > 0}, detail)
    return p


__all__ = ["reasonrag_payload"]
