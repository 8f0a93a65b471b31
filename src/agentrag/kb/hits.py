"""Ranked rows to hits: the passages' rows (from ``passages.sqlite``, or from memory for a small KB)
and the :class:`~agentrag.records.Hit` objects, built without pydantic's per-field work.

On a small KB a BM25 query costs bm25s ~10-40 us, and reading the 10 passages from SQLite (one
``SELECT ... WHERE row IN (...)`` a call) cost more than that. A store whose file
is at most :func:`cache_bytes` is therefore read into a list once, on its first search, and
searches index that list; a larger store is read per search, and nothing of it is held.
"""

from __future__ import annotations

import gc
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence

from agentrag.errors import UserError
from agentrag.kb.passages import PassageStore
from agentrag.records import SCHEMA_VERSION, Hit

Row = tuple[str, str, str, "str | None"]  # (id, title, text, metadata json)
#: default bound on ``passages.sqlite``'s size for holding its rows in memory (see :func:`cache_bytes`)
CACHE_MB = 32


def cache_bytes() -> int:
    """``$AGENTRAG_PASSAGE_CACHE_MB`` (MB; ``0`` turns the cache off) or :data:`CACHE_MB`, in bytes.

    The rows cost about 1.4x the file in memory (Python strings and tuples: 24.4 MB for a 17.2 MB
    file of 20,000 passages, docs/kb.md), in every process that searches (each server worker
    holds its own copy)."""
    raw = os.environ.get("AGENTRAG_PASSAGE_CACHE_MB", "").strip()
    try:
        mb = float(raw) if raw else CACHE_MB
    except ValueError as exc:
        raise UserError(f"AGENTRAG_PASSAGE_CACHE_MB must be a number of megabytes, got {raw!r}") from exc
    return max(0, int(mb * (1 << 20)))


class PassageRows:
    """Row (0-based) -> ``(id, title, text, metadata json)`` of one store: a list of every row when
    the store's file is at most ``max_bytes`` (read on the first :meth:`lookup`), else the rows
    asked for, read by :meth:`PassageStore.raw_rows`."""

    def __init__(self, store: PassageStore, max_bytes: int | None = None) -> None:
        self.store, self.generation = store, store.generation
        self.max_bytes = cache_bytes() if max_bytes is None else max_bytes
        self.table: list[Row] | None = None
        self._decided = False
        self._lock = threading.Lock()

    def lookup(self, rows: Iterable[int]) -> Sequence[Row] | Mapping[int, Row]:
        """Something indexable by each of ``rows``: the whole table, or a dict of those rows."""
        if not self._decided:
            self._load()
        if self.table is not None:
            return self.table
        return self.store.raw_rows(rows)

    def _load(self) -> None:
        with self._lock:
            if self._decided:
                return
            try:
                size = os.path.getsize(self.store.path)
            except OSError:
                size = None  # no file yet (an empty KB): read per search, which reports it
            if size is not None and size <= self.max_bytes:
                table = self.store.all_raw_rows()
                if len(table) == len(self.store):
                    self.table = table
            self._decided = True


_HIT_FIELDS = frozenset(("id", "title", "text", "score", "method", "kb", "metadata"))


def make_hits(ranked: list[list[tuple[int, float]]], found: Sequence[Row] | Mapping[int, Row], method: str,
              kb: str) -> list[list[Hit]]:
    """One hit list per ranked list (same order): ``Hit.model_construct(id=.., title=.., text=..,
    score=.., method=.., kb=.., metadata=..)`` without its per-field default lookups (the passage
    was validated when it was stored). Building hits was most of our overhead over raw bm25s.

    Python's cyclic garbage collector is paused while they are built (and resumed, if it ran,
    before returning): each hit adds three tracked objects, and on a batch of queries the
    collections these allocations trigger, each walking every tracked object of the process,
    cost twice as much as building the hits (measured in docs/kb.md). The hits hold no cycles
    (strings, floats, a metadata dict), so pausing frees nothing later than it would have been."""
    new, setattr_, fields, loads = Hit.__new__, object.__setattr__, _HIT_FIELDS, json.loads
    out: list[list[Hit]] = []
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        for rs in ranked:
            hits = []
            for r, s in rs:
                row = found[r]
                h = new(Hit)
                setattr_(h, "__dict__", {"schema_version": SCHEMA_VERSION, "id": row[0], "title": row[1],
                                         "text": row[2], "score": float(s), "method": method, "kb": kb,
                                         "metadata": loads(row[3]) if row[3] else {}})
                setattr_(h, "__pydantic_fields_set__", set(fields))
                setattr_(h, "__pydantic_extra__", None)
                setattr_(h, "__pydantic_private__", None)
                hits.append(h)
            out.append(hits)
    except (IndexError, KeyError) as exc:
        raise UserError(f"an index row ({exc}) has no passage; the KB is damaged, rebuild it") from exc
    finally:
        if collecting:
            gc.enable()
    return out


__all__ = ["PassageRows", "make_hits", "cache_bytes", "CACHE_MB"]
