"""Suite runs (``suite.json`` + one eval run per cell under ``runs/``): the results table in the
papers' layout and the differences from the reference row in the Summary tab, and one list row per
question of every cell (method, dataset, prediction, EM/F1), its trajectory on click."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.eval.result import EvalResult
from agentrag.eval.suite import cell_dir, delta_rows, result_rows
from agentrag.report.viewer.common import (
    DocTable,
    Limits,
    Payload,
    col,
    display_name,
    failures_filter,
    read_config,
    read_json,
    read_stage,
    select_filter,
    table,
)
from agentrag.report.viewer.eval_view import gold_passages
from agentrag.report.viewer.trajectory import trajectory_detail

COLUMNS = [col("method", "method", pin=True), col("dataset", "dataset", pin=True), col("id", "id"),
           col("question", "question"), col("prediction", "prediction", pin=True), col("gold", "gold"),
           col("em", "EM", "num", pin=True), col("f1", "F1", "num", pin=True), col("ok", "correct", "bool"),
           col("steps", "steps", "num"), col("finish", "finish reason")]


def suite_payload(run_dir: Path, limits: Limits) -> Payload:
    summary = read_json(run_dir, "suite.json")
    docs = DocTable()
    p = Payload(kind="suite", title=f"Suite {display_name(run_dir)}", columns=COLUMNS, docs=docs, limits=limits,
                filters=[failures_filter("wrong only"), select_filter("method", "method"),
                         select_filter("dataset", "dataset"), select_filter("finish", "finish reason")])
    if summary.get("rows"):
        p.summary.append(table("Results (EM / F1, %)", *result_rows(summary)))
        if summary.get("delta"):
            head, rows = delta_rows(summary)
            p.summary.append(table(f"Difference from {summary['reference']} (points, paired bootstrap 95% "
                                   "interval; * excludes 0)", head, rows))
    for method in summary.get("rows", []):
        for dataset in summary.get("datasets", []):
            where = cell_dir(run_dir, method, dataset)
            golds, wanted = gold_passages(where), _asked(where)
            for r in read_stage(where, "results", EvalResult):
                if r.parent_id is not None or (wanted is not None and r.id not in wanted):
                    continue
                ids, titles = golds.get(r.id, ([], []))
                detail: dict[str, Any] = {
                    "id": r.id, "question": r.question, "golds": r.golden_answers, "prediction": r.prediction,
                    "scores": {"EM": r.em, "F1": round(r.f1, 4), "correct": r.correct, "gold recall": r.recall},
                    "method": method, "dataset": dataset, "topk": r.topk_per_step, "gold_ids": ids,
                }
                if r.trajectory is not None:
                    detail.update(trajectory_detail(r.trajectory, docs, limits, golds=r.golden_answers,
                                                    gold_ids=ids, gold_titles=titles))
                p.add({"method": method, "dataset": dataset, "id": r.id, "question": r.question[:200],
                       "prediction": (r.prediction or "")[:120], "gold": " | ".join(r.golden_answers)[:120],
                       "em": r.em, "f1": round(r.f1, 3), "ok": r.correct, "steps": r.steps,
                       "finish": r.finish_reason}, detail)
    return p


def _asked(cell: Path) -> set[str] | None:
    """The ids of the questions the cell's last run asked for (the first ``limit`` of its dataset;
    an earlier run with a larger limit may have left more in ``results.jsonl``); ``None`` when its
    dataset cannot be read any more (then every result is listed)."""
    cfg = read_config(cell)
    dataset = cfg.get("dataset")
    if not dataset or not Path(str(dataset)).is_file():
        return None
    from agentrag.eval.datasets import load_dataset

    try:
        return {i.id for i in load_dataset(str(dataset), str(cfg.get("fmt") or "auto"), limit=cfg.get("limit"))}
    except UserError:
        return None


__all__ = ["suite_payload"]
