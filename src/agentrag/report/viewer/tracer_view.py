"""Tracer builder runs: one row per atomic pair (the seed of a chain); the chain hop by hop with
every verification stage's verdict (reason, the model's answer, EM/F1, judge score), and the
failed attempts at the hop where it stopped. Rejected atomic pairs are rows too, with the
filter checks that rejected them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentrag.report.viewer.common import (
    Limits,
    Payload,
    col,
    display_name,
    failures_filter,
    funnel_table,
    read_json,
    read_stage,
    select_filter,
)
from agentrag.synth.tracer.schema import AtomicRecord, Check, DocRecord, Hop, HopRecord

COLUMNS = [col("id", "chain id"), col("question", "question (top hop)"), col("depth", "hops", "num"),
           col("template", "template"), col("domain", "domain"), col("status", "status"), col("ok", "ok", "bool")]


def _checks(checks: list[Check], limits: Limits) -> list[dict[str, Any]]:
    return [{"name": c.name, "passed": c.passed, "reason": limits.clip(c.reason), "answer": c.answer, "em": c.em,
             "f1": None if c.f1 is None else round(c.f1, 3), "judge": c.judge_score} for c in checks]


def _hop(h: Hop, limits: Limits) -> dict[str, Any]:
    return {"level": h.level, "template": h.template, "atomic_q": h.atomic_question, "atomic_a": h.atomic_answer,
            "doc_id": h.doc_id, "doc_title": h.doc_title, "doc_text": limits.clip(h.doc_text),
            "question": h.question, "answer": h.answer, "aliases": h.aliases, "verified": h.verified,
            "reason": h.reason, "checks": _checks(h.checks, limits)}


def _stage_levels(run_dir: Path) -> list[int]:
    found = (re.fullmatch(r"hop(\d+)\.jsonl", p.name) for p in run_dir.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def tracer_payload(run_dir: Path, limits: Limits) -> Payload:
    docs = {d.id: d for d in read_stage(run_dir, "docs", DocRecord)}
    atomic = read_stage(run_dir, "atomic", AtomicRecord)
    hops = {lv: {r.chain_id: r for r in read_stage(run_dir, f"hop{lv}", HopRecord)} for lv in _stage_levels(run_dir)}
    metrics = read_json(run_dir, "metrics.json")
    p = Payload(kind="tracer", title=f"Tracer run {display_name(run_dir)}", columns=COLUMNS, limits=limits,
                filters=[failures_filter(), select_filter("depth", "hops"), select_filter("template", "template")])
    funnel = funnel_table(metrics)
    if funnel:
        p.summary.append(funnel)
    for rec in atomic:
        doc = docs.get(rec.doc_id)
        base = {"doc": None if doc is None else {"title": doc.title, "text": limits.clip(doc.text),
                                                 "type": doc.entity_type, "domain": doc.domain}}
        if rec.status != "ok":
            p.add({"id": rec.id, "question": "", "depth": 0, "template": "", "domain": doc.domain if doc else "",
                   "status": f"atomic generation failed: {rec.reason}", "ok": False},
                  {**base, "hops": [], "atomic": {"status": "failed", "reason": rec.reason, "checks": []}})
            continue
        for pair in rec.pairs:
            if pair.status != "accepted":
                p.add({"id": pair.id, "question": pair.question[:200], "depth": 0, "template": "",
                       "domain": doc.domain if doc else "", "status": f"atomic rejected: {pair.reason}", "ok": False},
                      {**base, "hops": [], "atomic": {"status": "rejected", "reason": pair.reason, "question": pair.question,
                                                      "answer": pair.answer, "checks": _checks(pair.checks, limits)}})
                continue
            chain = [{"level": 1, "template": "atomic", "atomic_q": pair.question, "atomic_a": pair.answer,
                      "doc_id": doc.passage_id if doc else rec.doc_id, "doc_title": doc.title if doc else "",
                      "doc_text": limits.clip(doc.text) if doc else "", "question": pair.question,
                      "answer": pair.answer, "aliases": pair.aliases, "verified": True, "reason": None,
                      "checks": _checks(pair.checks, limits)}]
            failed: dict[str, Any] | None = None
            for lv in sorted(hops):
                r = hops[lv].get(pair.id)
                if r is None:
                    break
                if r.status == "verified" and r.hop is not None:
                    chain.append(_hop(r.hop, limits))
                    continue
                failed = {"level": lv, "reason": r.reason, "attempts": [_hop(a, limits) for a in r.attempts]}
                break
            top = chain[-1]
            status = f"verified to {len(chain)} hops" + (f"; hop {failed['level']} failed: {failed['reason']}"
                                                         if failed else "")
            p.add({"id": pair.id, "question": str(top["question"])[:200], "depth": len(chain),
                   "template": chain[1]["template"] if len(chain) > 1 else "atomic",
                   "domain": doc.domain if doc else "", "status": status, "ok": failed is None},
                  {**base, "hops": chain, "failed": failed})
    return p


__all__ = ["tracer_payload"]
