"""§3.4 human review: a review sheet (CSV + a static HTML page a rater fills in with a browser
only) and the read-back of up to three annotators' files: majority decision, disagreements, Fleiss'
kappa, comments.

The HTML page (:mod:`agentrag.synth.tracer.review_sheet`) shows each item with its chain, every
hop's full document and every gate's verdict, a Retain/Discard choice and a comment box; its Save
button downloads the rater's decisions as ``labels-<rater>.csv`` (``id,decision,comment,rater``).
An annotator file is that download, or ``sheet.csv`` with its ``decision`` column filled
(``Retain`` / ``Discard``, case-insensitive; ``r`` / ``d`` / ``keep`` accepted). Fleiss' kappa is
computed over the items every annotator labelled (it needs the same number of ratings per item).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.synth.tracer.review_sheet import sheet_html

COLUMNS = ["id", "hops", "type", "question", "answer", "chain", "documents", "decision", "comment"]
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


def _hops(chains: Mapping[str, dict[str, Any]], item: dict[str, Any]) -> list[dict[str, Any]]:
    chain = chains.get(item["metadata"]["chain_id"])
    return list(chain["hops"][:item["metadata"]["hops"]]) if chain else []


def _hop_line(h: dict[str, Any]) -> str:
    return (f"hop {h['level']} [{h['template']}] atomic Q: {h['atomic_question']} | atomic A: {h['atomic_answer']} | "
            f"doc: {h['doc_title']} ({h['doc_id']}) | Q: {h['question']} | A: {h['answer']}")


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
            m, hops = it["metadata"], _hops(chains, it)
            w.writerow([it["id"], m["hops"], m["type"], it["question"], " | ".join(it["golden_answers"]),
                        "\n".join(_hop_line(h) for h in hops),
                        "\n\n".join(f"[{h['level']}] {h['doc_title']}\n{h['doc_text']}" for h in hops), "", ""])
    html_path.write_text(sheet_html([(it, _hops(chains, it)) for it in items]), encoding="utf-8")
    return csv_path, html_path


@dataclass
class RaterLabels:
    """One rater's file read back: decisions (item id -> Retain/Discard), comments, the rater's name."""

    decisions: dict[str, str] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    rater: str | None = None


def read_label_file(path: str | Path) -> RaterLabels:
    """A rater's file: the sheet's download (``id,decision,comment,rater``) or a filled ``sheet.csv``.
    Blank decisions are skipped; comments are kept (also on undecided items)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"labels file {str(p)!r} not found")
    out = RaterLabels()
    raters: set[str] = set()
    with p.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"id", "decision"} <= set(reader.fieldnames):
            raise UserError(f"{p}:1: header needs the fields 'id' and 'decision' (got {reader.fieldnames})")
        for row in reader:
            comment = (row.get("comment") or "").strip()
            if comment:
                out.comments[row["id"]] = comment
            if (row.get("rater") or "").strip():
                raters.add((row.get("rater") or "").strip())
            raw = (row.get("decision") or "").strip()
            if not raw:
                continue
            d = _DECISIONS.get(raw.lower())
            if d is None:
                raise UserError(f"{p}:{reader.line_num}: field 'decision': {raw!r} is not Retain or Discard")
            out.decisions[row["id"]] = d
    out.rater = raters.pop() if len(raters) == 1 else None
    return out


def read_labels(path: str | Path) -> dict[str, str]:
    """One annotator's decisions: item id -> Retain/Discard (blank decisions are skipped)."""
    return read_label_file(path).decisions


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


def _names(files: Sequence[Path], read: Sequence[RaterLabels]) -> list[str]:
    """Each file's annotator: the rater named in it, else the file's stem, else its path; unique."""
    names: list[str] = []
    for f, lab in zip(files, read, strict=True):
        name = lab.rater or f.stem
        names.append(name if name not in names else str(f))
    if len(set(names)) != len(names):
        raise UserError(f"two label files name the same annotator: {names}")
    return names


def apply_review(run_dir: str | Path, label_files: Sequence[str | Path]) -> dict[str, Any]:
    """Read the annotators' files, write ``review/decisions.json`` (majority, disagreements, Fleiss'
    kappa, every vote and comment per item) and ``benchmark_reviewed.jsonl`` (the items whose
    majority decision is Retain)."""
    run = Path(run_dir)
    files = [Path(f) for f in label_files]
    read = [read_label_file(f) for f in files]
    names = _names(files, read)
    result = decide({n: lab.decisions for n, lab in zip(names, read, strict=True)})
    ids = sorted({i for lab in read for i in (*lab.decisions, *lab.comments)})
    result["per_item"] = {i: {"decision": result["decisions"].get(i, "Undecided"),
                              "votes": {n: lab.decisions[i] for n, lab in zip(names, read, strict=True)
                                        if i in lab.decisions},
                              "comments": {n: lab.comments[i] for n, lab in zip(names, read, strict=True)
                                           if i in lab.comments}} for i in ids}
    result["comments"] = sum(len(v["comments"]) for v in result["per_item"].values())
    keep = set(result["retained"])
    items = _items(run / "benchmark.jsonl")
    (run / "review").mkdir(exist_ok=True)
    (run / "review" / "decisions.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    with (run / "benchmark_reviewed.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            if it["id"] in keep:
                fh.write(json.dumps(it, ensure_ascii=False) + "\n")
    return result


__all__ = ["write_review_sheet", "read_labels", "read_label_file", "RaterLabels", "fleiss_kappa", "decide", "apply_review", "COLUMNS"]
