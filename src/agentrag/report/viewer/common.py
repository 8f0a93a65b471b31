"""What every run kind's loader shares: text limits, the deduplicated document table, reading
optional stage files, and the payload shape the page renders.

A payload is a plain dict: ``kind`` and ``title``; ``summary`` (small tables: metrics, funnel);
``columns`` / ``rows`` (one row per listed record, aligned with ``details``); ``filters`` (what
the page can filter on); ``details`` (one JSON object per row, rendered on click) and ``docs``
(documents referenced by index from the details, each stored once).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from agentrag.errors import UserError
from agentrag.runs import read_records

M = TypeVar("M", bound=BaseModel)

#: the size the page of a run is fitted into by cutting its documents (see :func:`DocTable.clipped`)
MAX_MB = 5.0
#: document limits tried, longest first, when the page with whole documents is too big
DOC_LIMITS = (1000, 600, 400, 300, 200, 150, 100)
#: characters kept of other long record text (observations, thoughts, responses, evidence, raw outputs)
TEXT_CHARS = 2000


@dataclass
class Limits:
    """How much long record text the page keeps: ``None`` keeps it whole (``--serve`` pages)."""

    text_chars: int | None = TEXT_CHARS

    def clip(self, text: str | None) -> str | None:
        return clip(text, self.text_chars)


def clip(text: str | None, n: int | None) -> str | None:
    """``text`` cut at ``n`` characters with a note of how many were left out (``None``: whole)."""
    if text is None or n is None or len(text) <= n:
        return text
    return text[:n] + f"… [+{len(text) - n} chars]"


@dataclass
class DocTable:
    """Documents stored once per page and referenced by index: ``[id, title, text, kb, type]``.
    Texts are kept whole here; the page cuts them (:meth:`clipped`) to fit its size."""

    rows: list[list[Any]] = field(default_factory=list)
    index: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, doc_id: str, title: str, text: str, kb: str = "", dtype: str | None = None) -> int:
        key = (doc_id, kb)
        if key not in self.index:
            self.index[key] = len(self.rows)
            self.rows.append([doc_id, title, text, kb, dtype])
        return self.index[key]

    def clipped(self, doc_chars: int | None) -> list[list[Any]]:
        """The rows with each text cut at ``doc_chars`` characters (``None``: whole)."""
        if doc_chars is None:
            return self.rows
        return [[r[0], r[1], clip(r[2], doc_chars), *r[3:]] for r in self.rows]


@dataclass
class Payload:
    """The data of one page (see the module docstring)."""

    kind: str
    title: str
    columns: list[dict[str, Any]]
    rows: list[list[Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    filters: list[dict[str, str]] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    charts: list[dict[str, str]] = field(default_factory=list)
    #: the run header: ``[label, value]`` (model, data, config, tokens, wall time)
    header: list[list[str]] = field(default_factory=list)
    docs: DocTable = field(default_factory=DocTable)
    limits: Limits = field(default_factory=Limits)

    def add(self, row: dict[str, Any], detail: dict[str, Any]) -> None:
        self.rows.append([row.get(c["key"]) for c in self.columns])
        self.details.append(detail)

    def meta(self) -> dict[str, Any]:
        """Everything but the details and documents (parsed when the page opens)."""
        return {"kind": self.kind, "title": self.title, "columns": self.columns, "rows": self.rows,
                "filters": self.filters}

    def bulk(self, doc_chars: int | None = None) -> dict[str, Any]:
        """The details and the documents (cut at ``doc_chars``), unpacked on the first click."""
        return {"details": self.details, "docs": self.docs.clipped(doc_chars)}


def col(key: str, label: str, kind: str = "text", pin: bool = False) -> dict[str, Any]:
    """A table column: ``kind`` is text, num or bool (how it sorts and shows); ``pin``: a key
    column, placed first and kept narrow so it stays in view when the list pane is narrow."""
    return {"key": key, "label": label, "type": kind, **({"pin": True} if pin else {})}


def failures_filter(label: str = "failures only") -> dict[str, str]:
    """The filter that keeps the rows whose ``ok`` column is not true."""
    return {"key": "ok", "label": label, "kind": "failures"}


def select_filter(key: str, label: str) -> dict[str, str]:
    return {"key": key, "label": label, "kind": "select"}


def stage_file(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.jsonl"


def read_stage(run_dir: Path, name: str, model: type[M]) -> list[M]:
    """The records of ``<run_dir>/<name>.jsonl`` (none when the stage has not run yet)."""
    p = stage_file(run_dir, name)
    return list(read_records(p, model)) if p.exists() else []


def read_grouped(run_dir: Path, name: str, model: type[M], key: Callable[[M], Any]) -> dict[str, list[M]]:
    """The records of stage ``name`` grouped by ``str(key(record))``, in file order."""
    out: dict[str, list[M]] = defaultdict(list)
    for rec in read_stage(run_dir, name, model):
        out[str(key(rec))].append(rec)
    return out


def funnel_table(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The run's ``metrics["funnel"]`` (stage, in, out, rejected reasons, unfinished) as a summary
    table; None when the run has no funnel yet."""
    rows = metrics.get("funnel")
    if not isinstance(rows, list) or not rows:
        return None
    rows = [r for r in rows if isinstance(r, dict)]
    unfinished = any("unfinished" in r for r in rows)
    # stages that count different things (EviPath: items, then sub-questions): a column says what
    counted = len({r.get("unit") or "items" for r in rows}) > 1
    head = ["stage"] + (["counts"] if counted else []) + ["in", "out", "rejected (why)"] + \
        (["unfinished"] if unfinished else [])
    return table("Funnel", head, [
        [r.get("stage")] + ([r.get("unit") or "items"] if counted else []) +
        [r.get("in"), r.get("out"), ", ".join(f"{k}: {v}" for k, v in (r.get("rejected") or {}).items())]
        + ([r.get("unfinished", "")] if unfinished else []) for r in rows])


def read_json(run_dir: Path, name: str) -> dict[str, Any]:
    """``<run_dir>/<name>`` as a JSON object (empty when absent); bad JSON is a UserError."""
    p = run_dir / name
    if not p.exists():
        return {}
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    return obj if isinstance(obj, dict) else {}


def read_config(run_dir: Path) -> dict[str, Any]:
    """The run's resolved ``config.yaml`` (empty when absent or unreadable)."""
    p = run_dir / "config.yaml"
    if not p.exists():
        return {}
    try:
        obj = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: invalid YAML ({exc})") from exc
    return obj if isinstance(obj, dict) else {}


def table(title: str, headers: list[str], rows: Iterable[list[Any]]) -> dict[str, Any]:
    """A summary table of the page."""
    return {"title": title, "headers": headers, "rows": [list(r) for r in rows]}


def metric_rows(metrics: dict[str, Any], keys: Iterable[str]) -> Iterator[list[Any]]:
    """``[key, value]`` for the scalar ``keys`` present in ``metrics``."""
    for k in keys:
        v = metrics.get(k)
        if v is not None and not isinstance(v, (dict, list)):
            yield [k, round(v, 4) if isinstance(v, float) else v]


def display_name(run_dir: Path) -> str:
    return os.path.basename(os.path.abspath(run_dir))


__all__ = ["MAX_MB", "DOC_LIMITS", "TEXT_CHARS", "Limits", "clip", "DocTable", "Payload", "col", "failures_filter", "select_filter",
           "read_stage", "read_json", "read_config", "table", "metric_rows", "display_name", "stage_file"]
