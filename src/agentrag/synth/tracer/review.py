"""§3.4 human review: a review sheet (CSV + static HTML, each chain hop by hop with a Retain/Discard
field) and the read-back of up to three annotators' labels: majority decision, disagreements,
Fleiss' kappa.

An annotator file is the CSV sheet with its ``decision`` column filled (``Retain`` / ``Discard``,
case-insensitive; ``r`` / ``d`` / ``keep`` accepted). Fleiss' kappa is computed over the items
every annotator labelled (it needs the same number of ratings per item).
"""

from __future__ import annotations

import csv
import html
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError

COLUMNS = ["id", "hops", "type", "question", "answer", "chain", "decision", "comment"]
_DECISIONS = {"retain": "Retain", "r": "Retain", "keep": "Retain", "discard": "Discard", "d": "Discard",
              "drop": "Discard"}


def _items(benchmark: Path) -> list[dict[str, Any]]:
    if not benchmark.is_file():
        raise UserError(f"{benchmark} not found; run `agentrag synth tracer --out DIR` first")
    return [json.loads(line) for line in benchmark.read_text(encoding="utf-8").splitlines() if line.strip()]


def _chains(run: Path) -> dict[str, dict[str, Any]]:
    path = run / "chains.jsonl"
    if not path.is_file():
        return {}
    return {c["id"]: c for c in (json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip())}


def _hop_lines(chain: dict[str, Any] | None, level: int) -> list[str]:
    if chain is None:
        return []
    out = []
    for h in chain["hops"][:level]:
        out.append(f"hop {h['level']} [{h['template']}] atomic Q: {h['atomic_question']} | atomic A: "
                   f"{h['atomic_answer']} | doc: {h['doc_title']} ({h['doc_id']}) | Q: {h['question']} | A: {h['answer']}")
    return out


def write_review_sheet(run_dir: str | Path, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``review/sheet.csv`` and ``review/sheet.html`` for the run's ``benchmark.jsonl``."""
    run = Path(run_dir)
    out = Path(out_dir) if out_dir else run / "review"
    out.mkdir(parents=True, exist_ok=True)
    items, chains = _items(run / "benchmark.jsonl"), _chains(run)
    csv_path, html_path = out / "sheet.csv", out / "sheet.html"
    with csv_path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for it in items:
            m = it["metadata"]
            w.writerow([it["id"], m["hops"], m["type"], it["question"], " | ".join(it["golden_answers"]),
                        "\n".join(_hop_lines(chains.get(m["chain_id"]), m["hops"])), "", ""])
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Tracer review sheet</title><style>"
             "body{font-family:sans-serif;max-width:60em;margin:auto}.item{border:1px solid #ccc;margin:1em 0;"
             "padding:.5em}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px;vertical-align:top}"
             "</style></head><body><h1>Tracer review sheet</h1><p>For each item choose Retain or Discard "
             "(factual, faithful to the documents, fluent; every intermediate step valid; comparisons on one "
             "dimension). Copy your decisions into the <code>decision</code> column of sheet.csv.</p>"]
    for it in items:
        m = it["metadata"]
        chain = chains.get(m["chain_id"])
        e = html.escape
        parts.append(f"<div class='item'><h3>{e(it['id'])} — {m['hops']}-hop {e(m['type'])}</h3>"
                     f"<p><b>Question:</b> {e(it['question'])}<br><b>Answer:</b> {e(' | '.join(it['golden_answers']))}</p>"
                     "<table><tr><th>hop</th><th>atomic question / answer</th><th>document</th>"
                     "<th>question at this hop / answer</th></tr>")
        for h in (chain["hops"][:m["hops"]] if chain else []):
            parts.append(f"<tr><td>{h['level']} {e(h['template'])}</td><td>{e(h['atomic_question'])}<br>"
                         f"<i>{e(h['atomic_answer'])}</i></td><td><b>{e(h['doc_title'])}</b><br>"
                         f"{e(h['doc_text'][:400])}</td><td>{e(h['question'])}<br><i>{e(h['answer'])}</i></td></tr>")
        parts.append(f"</table><p><label><input type='radio' name='{e(it['id'])}' value='Retain'> Retain</label> "
                     f"<label><input type='radio' name='{e(it['id'])}' value='Discard'> Discard</label></p></div>")
    parts.append("</body></html>")
    html_path.write_text("\n".join(parts), encoding="utf-8")
    return csv_path, html_path


def read_labels(path: str | Path) -> dict[str, str]:
    """One annotator's labels: item id -> Retain/Discard (blank decisions are skipped)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"labels file {str(p)!r} not found")
    out: dict[str, str] = {}
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"id", "decision"} <= set(reader.fieldnames):
            raise UserError(f"{p}:1: header needs the fields 'id' and 'decision' (got {reader.fieldnames})")
        for row in reader:
            raw = (row.get("decision") or "").strip()
            if not raw:
                continue
            d = _DECISIONS.get(raw.lower())
            if d is None:
                raise UserError(f"{p}:{reader.line_num}: field 'decision': {raw!r} is not Retain or Discard")
            out[row["id"]] = d
    return out


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of an items x categories matrix of rating counts (same raters per item).
    ``None`` when undefined (fewer than 2 raters, no items, or every rating in one category)."""
    if not counts:
        return None
    n = sum(counts[0])
    if n < 2 or any(sum(r) != n for r in counts):
        return None
    big_n, k = len(counts), len(counts[0])
    p_bar = sum((sum(c * c for c in row) - n) / (n * (n - 1)) for row in counts) / big_n
    p_j = [sum(row[j] for row in counts) / (big_n * n) for j in range(k)]
    pe = sum(p * p for p in p_j)
    if pe >= 1.0:
        return None
    return (p_bar - pe) / (1 - pe)


def decide(labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Majority decision per item over annotators' labels (annotator -> item -> label), the items
    they disagree on, and Fleiss' kappa over the items every annotator labelled."""
    if not 1 <= len(labels) <= 3:
        raise UserError(f"give 1 to 3 annotator files, got {len(labels)}")
    items = sorted({i for lab in labels.values() for i in lab})
    decisions: dict[str, str] = {}
    disagreements: list[dict[str, Any]] = []
    rows: list[list[int]] = []
    for i in items:
        votes = {a: lab[i] for a, lab in labels.items() if i in lab}
        c = Counter(votes.values())
        retain, discard = c["Retain"], c["Discard"]
        decisions[i] = "Retain" if retain > discard else "Discard" if discard > retain else "Tie"
        if len(c) > 1:
            disagreements.append({"id": i, "votes": votes, "decision": decisions[i]})
        if len(votes) == len(labels):
            rows.append([retain, discard])
    kappa = fleiss_kappa(rows) if len(labels) >= 2 else None
    return {"annotators": list(labels), "items": len(items), "items_rated_by_all": len(rows),
            "decisions": decisions, "retained": sorted(i for i, d in decisions.items() if d == "Retain"),
            "disagreements": disagreements, "fleiss_kappa": None if kappa is None else round(kappa, 4)}


def apply_review(run_dir: str | Path, label_files: Sequence[str | Path]) -> dict[str, Any]:
    """Read the annotators' files, write ``review/decisions.json`` and ``benchmark_reviewed.jsonl``
    (the items whose majority decision is Retain)."""
    run = Path(run_dir)
    labels = {Path(f).stem if Path(f).stem not in {Path(g).stem for g in label_files if g != f} else str(f):
              read_labels(f) for f in label_files}
    result = decide(labels)
    keep = set(result["retained"])
    items = _items(run / "benchmark.jsonl")
    (run / "review").mkdir(exist_ok=True)
    (run / "review" / "decisions.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    with (run / "benchmark_reviewed.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            if it["id"] in keep:
                fh.write(json.dumps(it, ensure_ascii=False) + "\n")
    return result


__all__ = ["write_review_sheet", "read_labels", "fleiss_kappa", "decide", "apply_review", "COLUMNS"]
