"""Eval runs (``results.jsonl`` + ``metrics.json``): one row per question, its trajectory on
click, the metric tables of the report and three charts (accuracy by hop, steps of correct vs
incorrect answers, mean top-k per retrieval step)."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.eval.result import EvalResult
from agentrag.render import bar_chart_svg, fmt_cell, grouped_bar_chart_svg
from agentrag.report.eval_report import eval_sections
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
from agentrag.report.viewer.trajectory import trajectory_detail

log = logging.getLogger(__name__)

#: key columns first (question, prediction, gold, EM/F1, verdict), so they stay in view in a narrow list pane
COLUMNS = [col("id", "id"), col("question", "question", pin=True), col("prediction", "prediction", pin=True),
           col("gold", "gold", pin=True), col("em", "EM", "num", pin=True), col("f1", "F1", "num", pin=True),
           col("ok", "correct", "bool", pin=True), col("judge", "judge", "num"), col("hops", "hops", "num"),
           col("steps", "steps", "num"), col("finish", "finish reason")]


def gold_texts(config: dict[str, Any], ids: set[str]) -> dict[str, tuple[str, str]]:
    """Passage id -> (title, text) of the gold passages, read from the run's KB directory (its
    ``passages.sqlite``, read-only); empty when the KB is a server or not there any more."""
    kb = config.get("kb")
    path = Path(str(kb)) / "passages.sqlite" if kb else None
    if not ids or path is None or not path.is_file():
        return {}
    from agentrag.kb.passages import PassageStore

    store = PassageStore(path)
    out = {}
    for i in sorted(ids):
        psg = store.by_id(i)
        if psg is not None:
            out[i] = (psg.title, psg.text)
    return out


def gold_passages(run_dir: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Item id -> (supporting passage ids, supporting titles), from the dataset the run's
    ``config.yaml`` names (ids from the raw multi-hop files, or a FlashRAG file's
    ``metadata.supporting_passage_ids`` / ``supporting_doc_ids``); empty when it is not readable any more (then no passage is marked gold,
    only the documents containing a gold answer)."""
    cfg = read_config(run_dir)
    dataset = cfg.get("dataset")
    if not dataset or not Path(str(dataset)).is_file():
        return {}
    from agentrag.eval.datasets import load_dataset

    try:
        items = load_dataset(str(dataset), str(cfg.get("fmt") or "auto"))
    except UserError as exc:
        log.warning("gold passages not marked: %s", exc)
        return {}
    out = {}
    for i in items:  # the loader reads FlashRAG metadata ids too: the same golds eval's recall uses
        out[i.id] = (list(i.supporting_passage_ids), [str(t) for t in i.metadata.get("supporting_titles") or ()])
    return out


def _charts(results: Sequence[EvalResult]) -> list[dict[str, str]]:
    main = [r for r in results if r.parent_id is None]
    by_hop: dict[str, list[bool]] = defaultdict(list)
    for r in sorted(main, key=lambda r: r.hops or 0):
        by_hop[str(r.hops) if r.hops is not None else "?"].append(r.correct is True)
    acc = {h: round(sum(v) / len(v), 3) for h, v in by_hop.items()}
    steps: dict[str, Counter[str]] = {"correct": Counter(), "incorrect": Counter()}
    topk: dict[str, dict[int, list[int]]] = {"correct": defaultdict(list), "incorrect": defaultdict(list)}
    for r in main:
        side = "correct" if r.correct is True else "incorrect"
        steps[side][str(r.steps)] += 1
        for i, k in enumerate(r.topk_per_step, start=1):
            topk[side][i].append(k)
    labels = [str(n) for n in sorted({r.steps for r in main})]
    hist = {side: {k: c.get(k, 0) for k in labels} for side, c in steps.items()}
    idx = sorted({i for t in topk.values() for i in t})
    mean_topk = {side: {str(i): round(sum(t[i]) / len(t[i]), 2) if t[i] else 0 for i in idx}
                 for side, t in topk.items()}
    return [
        {"title": "Accuracy by hop count", "svg": bar_chart_svg(acc, x_label="hops", y_label="accuracy")},
        {"title": "Retrieval steps: correct vs incorrect",
         "svg": grouped_bar_chart_svg(hist, x_label="retrieval steps", y_label="questions")},
        {"title": "Mean top-k per retrieval step",
         "svg": grouped_bar_chart_svg(mean_topk, x_label="retrieval step", y_label="mean top-k")},
    ]


def eval_payload(run_dir: Path, limits: Limits) -> Payload:
    results = read_stage(run_dir, "results", EvalResult)
    metrics = read_json(run_dir, "metrics.json")
    golds = gold_passages(run_dir)
    config = read_config(run_dir)
    texts = gold_texts(config, {i for r in results for i in golds.get(r.id, ([], []))[0]})
    docs = DocTable()
    p = Payload(kind="eval", title=f"Eval run {display_name(run_dir)}", columns=COLUMNS, docs=docs, limits=limits,
                filters=[failures_filter("wrong only"), select_filter("hops", "hops"),
                         select_filter("finish", "finish reason")])
    for s in eval_sections(metrics) if metrics else []:
        if s.headers:
            p.summary.append(table(s.title, s.headers, [[fmt_cell(c) for c in r] for r in s.rows]))
    p.charts = _charts(results)
    for r in results:
        ids, titles = golds.get(r.id, ([], []))
        detail: dict[str, Any] = {
            "id": r.id, "question": r.question, "golds": r.golden_answers, "prediction": r.prediction,
            "scores": {"EM": r.em, "F1": round(r.f1, 4), "acc": r.acc, "judge": r.judge, "judge error": r.judge_error,
                       "gold recall": r.recall, "correct": r.correct},
            "hops": r.hops, "level": r.level, "parent": r.parent_id, "topk": r.topk_per_step, "gold_ids": ids,
        }
        if r.trajectory is not None:
            detail.update(trajectory_detail(r.trajectory, docs, limits, golds=r.golden_answers, gold_ids=ids,
                                            gold_titles=titles))
            _failure(detail, r.trajectory, config, limits)
        seen = {row[0]: n for n, row in enumerate(docs.rows)}
        detail["gold_docs"] = [docs.add(i, *texts[i]) if i in texts else seen.get(i) for i in ids]
        p.add({"id": r.id, "question": r.question[:200], "hops": r.hops, "gold": " | ".join(r.golden_answers)[:120],
               "em": r.em, "f1": round(r.f1, 3), "judge": r.judge, "ok": r.correct, "steps": r.steps,
               "finish": r.finish_reason, "prediction": (r.prediction or "")[:120]}, detail)
    return p


def _failure(detail: dict[str, Any], traj: Any, config: dict[str, Any], limits: Limits) -> None:
    """For a trajectory that did not answer: the model's raw output of its last failed step (or its
    last step) and the setting that would have helped."""
    from agentrag.report.viewer.header import failure_help

    if traj.finish_reason == "answered":
        return
    failed = [s for s in traj.steps if s.error] or traj.steps[-1:]
    last = failed[-1] if failed else None
    raw = (last.raw or last.thought) if last is not None else None
    detail["raw_output"] = limits.clip(raw)
    detail["help"] = failure_help(last.error if last is not None else None, config, traj.finish_reason)


__all__ = ["eval_payload", "gold_passages", "gold_texts"]
