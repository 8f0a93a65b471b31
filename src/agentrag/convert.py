"""CSV/TSV to JSONL, the conversion the "looks like CSV" hint names.

``python -m agentrag.convert IN.csv OUT.jsonl`` writes one JSON object per row. It never writes over
a file: ``OUT`` must not exist (and is never ``IN``). Rows of a QA sheet become loadable FlashRAG
records: a ``golden_answers``, ``answers`` or ``answer`` column becomes the list ``golden_answers``
(a cell holding a JSON list is read as that list; any other cell is one answer), and a missing
``id`` is numbered from the row. Other sheets (``title,text`` corpora) keep their columns as they are.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentrag.errors import UserError

ANSWER_COLUMNS = ("golden_answers", "answers", "answer")


def free_name(src: str | os.PathLike[str]) -> Path:
    """A ``.jsonl`` name beside ``src`` that names no existing file and is not ``src`` itself:
    ``stem.jsonl``, else ``stem.converted.jsonl``, ``stem.converted-2.jsonl``, ..."""
    p = Path(src)
    candidates = [p.with_suffix(".jsonl"), p.with_name(p.stem + ".converted.jsonl")]
    n = 2
    while True:
        for c in candidates:
            if not c.exists() and c.resolve() != p.resolve():
                return c
        candidates = [p.with_name(f"{p.stem}.converted-{n}.jsonl")]
        n += 1


def _answers(cell: str) -> list[str]:
    text = cell.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
            return [str(v) for v in value]
    return [text] if text else []


def convert_row(row: dict[str, Any], rowno: int) -> dict[str, Any]:
    """One CSV row as a record: a QA row (a ``question`` column and an answer column) gets
    ``golden_answers`` as a list and an ``id``; any other row is returned as it is."""
    if "question" not in row or not any(c in row for c in ANSWER_COLUMNS):
        return dict(row)
    out: dict[str, Any] = {"id": row.get("id") or f"row{rowno}"}
    col = next(c for c in ANSWER_COLUMNS if c in row)
    for k, v in row.items():
        if k in ANSWER_COLUMNS:
            if k == col:
                out["golden_answers"] = _answers(v or "")
        elif k != "id":
            out[k] = v
    return out


def csv_to_jsonl(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """Write the rows of ``src`` (comma-separated; tab-separated for ``.tsv`` or a tab in the header)
    to the new file ``dst`` as JSONL; return the number of records. Refuses an existing ``dst``."""
    s, d = Path(src), Path(dst)
    if d.exists() or d.resolve() == s.resolve():
        raise UserError(f"{d} exists; name a new output file (nothing was written), e.g. {free_name(s)}")
    with s.open(encoding="utf-8", newline="") as fh:
        header = fh.readline()
        fh.seek(0)
        delim = "\t" if s.suffix.lower() == ".tsv" or "\t" in header else ","
        rows = list(csv.DictReader(fh, delimiter=delim))
    if not rows:
        raise UserError(f"{s}: no rows under the header line; nothing was written")
    recs = [convert_row(r, i) for i, r in enumerate(rows, start=1)]
    for i, r in enumerate(recs, start=1):
        if "golden_answers" in r and not r["golden_answers"]:
            raise UserError(f"{s}:{i + 1}: field 'golden_answers': empty answer; nothing was written")
    with d.open("x", encoding="utf-8") as out:  # "x": never replaces a file created meanwhile
        for r in recs:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(recs)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m agentrag.convert IN.csv OUT.jsonl (OUT must be a new file)\n")
        return 2
    try:
        n = csv_to_jsonl(args[0], args[1])
    except (UserError, OSError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stderr.write(f"wrote {n} records to {args[1]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["csv_to_jsonl", "convert_row", "free_name"]
