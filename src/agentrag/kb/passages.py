"""The passage store of a knowledge base: one SQLite file, read lazily, memory-mapped.

Rows are positions in the indexes (``row`` is SQLite's rowid, so a get by row is one B-tree
lookup); ``id`` and ``key`` (a hash of the normalised title and text, see
:func:`agentrag.kb.ingest.passage_id`) are indexed, so a passage is found by either without
holding anything in RAM. ``titles`` holds the sorted distinct titles, so sampling titles needs no
scan. We chose SQLite over an Arrow/Parquet file after measuring both (``benchmarks/passage_store.py``):
Arrow needs an id -> row map in RAM (or a sorted copy of the ids) where SQLite has an index on disk.

Connections are per thread and per process (a forked server worker opens its own).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from agentrag.errors import UserError
from agentrag.records import Passage

FILE = "passages.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (row INTEGER PRIMARY KEY, id TEXT NOT NULL, key TEXT NOT NULL,
    title TEXT NOT NULL, text TEXT NOT NULL, metadata TEXT);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
"""
_INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS passages_id ON passages(id);
CREATE INDEX IF NOT EXISTS passages_key ON passages(key);
"""
_MMAP = 1 << 40  # map as much of the file as the OS allows; pages are shared between processes


def content_key(title: str, text: str) -> str:
    from agentrag.kb.ingest import passage_id

    return passage_id(title, text)


class PassageStore:
    """Passages by row, id or content key, from ``<dir>/passages.sqlite``."""

    def __init__(self, path: Path, *, writable: bool = False) -> None:
        self.path, self.writable = Path(path), writable
        self._local = threading.local()
        self._n: int | None = None
        self.generation = 0  # bumped by every append (what caches of its rows compare)

    # ---- connections ----------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        key = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != key:
            if self.writable:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                conn.executescript(_SCHEMA)
            else:
                if not self.path.exists():
                    raise UserError(f"{self.path}: passage store not found; the KB is damaged, rebuild it")
                conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            # readers map the file (pages shared between server workers); a build reads every
            # passage once, and mapped pages would all count in its RSS: it reads through the cache
            conn.execute(f"PRAGMA mmap_size={0 if self.writable else _MMAP}")
            conn.execute("PRAGMA cache_size=-16000")  # 16 MB page cache per connection
            self._local.conn, self._local.pid = conn, key
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ---- writing ----------------------------------------------------------------------------------
    def append(self, passages: Iterable[Passage], *, dedupe: bool = False, chunk: int = 5000) -> int:
        """Append passages (rows continue after the last one); returns how many were added.

        Duplicate ids are a :class:`UserError`; with ``dedupe`` a passage whose title and text
        are already stored is skipped (first occurrence wins). Each chunk is one transaction, so a
        kill loses at most the chunk in flight.
        """
        conn = self._conn()
        conn.executescript(_INDEXES)
        added = 0
        consumed = self.consumed()
        batch: list[Passage] = []

        def flush() -> None:
            nonlocal added, consumed
            conn.execute("BEGIN")
            try:
                for p in batch:
                    if not p.text.strip():
                        raise UserError(f"passage {p.id!r} has an empty text")
                    key = content_key(p.title, p.text)
                    if dedupe and conn.execute("SELECT 1 FROM passages WHERE key=?", (key,)).fetchone():
                        continue
                    if conn.execute("SELECT 1 FROM passages WHERE id=?", (p.id,)).fetchone():
                        raise UserError(f"duplicate passage id {p.id!r}; passage ids must be unique within a KB"
                                        + (" (two different passages use it)" if dedupe else ""))
                    conn.execute("INSERT INTO passages(id, key, title, text, metadata) VALUES (?,?,?,?,?)",
                                  (p.id, key, p.title, p.text, json.dumps(p.metadata) if p.metadata else None))
                    added += 1
                consumed += len(batch)
                conn.execute("INSERT OR REPLACE INTO meta(name, value) VALUES ('consumed', ?)", (str(consumed),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            batch.clear()

        for p in passages:
            batch.append(p)
            if len(batch) >= chunk:
                flush()
        if batch:
            flush()
        self._n = None
        self.generation += 1
        return added

    def finish(self) -> None:
        """Write the sorted distinct titles (for :meth:`sample_titles`) and compact the file."""
        conn = self._conn()
        conn.executescript(_INDEXES + """
            DROP TABLE IF EXISTS titles;
            CREATE TABLE titles (rank INTEGER PRIMARY KEY, title TEXT NOT NULL);
            INSERT INTO titles(title) SELECT DISTINCT title FROM passages WHERE title != '' ORDER BY title;
        """)

    def set_meta(self, name: str, value: str) -> None:
        self._conn().execute("INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)", (name, value))

    def consumed(self) -> int:
        """How many input passages earlier :meth:`append` calls consumed (to resume after a kill)."""
        return int(self.get_meta("consumed") or 0)

    def get_meta(self, name: str) -> str | None:
        try:
            row = self._conn().execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else str(row[0])

    # ---- reading ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._n is None:
            row = self._conn().execute("SELECT max(row) FROM passages").fetchone()
            self._n = int(row[0]) if row and row[0] is not None else 0
        return self._n

    @staticmethod
    def _passage(r: Sequence[Any]) -> Passage:
        return Passage.model_construct(id=r[0], title=r[1], text=r[2],
                                       metadata=json.loads(r[3]) if r[3] else {})

    def by_rows(self, rows: Sequence[int]) -> list[Passage]:
        """Passages at index rows (0-based), in the given order."""
        found = self.raw_rows(rows)
        return [self._passage(found[r]) for r in rows]

    def raw_rows(self, rows: Iterable[int]) -> dict[int, tuple[str, str, str, str | None]]:
        """Index row (0-based) -> ``(id, title, text, metadata json)`` for the distinct ``rows``:
        what search builds its hits from (no intermediate :class:`Passage`)."""
        uniq = sorted(set(rows))
        found: dict[int, tuple[str, str, str, str | None]] = {}
        conn = self._conn()
        for i in range(0, len(uniq), 500):
            part = uniq[i:i + 500]
            q = f"SELECT row - 1, id, title, text, metadata FROM passages WHERE row IN ({','.join('?' * len(part))})"
            for r in conn.execute(q, [x + 1 for x in part]):
                found[r[0]] = r[1:]
        if len(found) != len(uniq):
            missing = next(r for r in uniq if r not in found)
            raise UserError(f"{self.path}: index row {missing} has no passage; the KB is damaged, rebuild it")
        return found

    def all_raw_rows(self) -> list[tuple[str, str, str, str | None]]:
        """Every row's ``(id, title, text, metadata json)`` in row order (a small store's search cache)."""
        return self._conn().execute("SELECT id, title, text, metadata FROM passages ORDER BY row").fetchall()

    def by_id(self, passage_id: str) -> Passage | None:
        r = self._conn().execute("SELECT id, title, text, metadata FROM passages WHERE id=?",
                                 (passage_id,)).fetchone()
        return None if r is None else self._passage(r)

    def has_ids(self, ids: Iterable[str]) -> set[str]:
        conn = self._conn()
        return {i for i in ids if conn.execute("SELECT 1 FROM passages WHERE id=?", (i,)).fetchone()}

    def ids_for_keys(self, keys: Iterable[str]) -> dict[str, str]:
        """Content key -> id of the first stored passage with that normalised title and text."""
        conn = self._conn()
        out = {}
        for k in keys:
            r = conn.execute("SELECT id FROM passages WHERE key=? ORDER BY row LIMIT 1", (k,)).fetchone()
            if r is not None:
                out[k] = str(r[0])
        return out

    def __iter__(self) -> Iterator[Passage]:
        conn = self._conn()
        last = 0
        while True:  # keyset pagination: bounded memory, no long-lived cursor
            rows = conn.execute("SELECT row, id, title, text, metadata FROM passages WHERE row > ? ORDER BY row "
                                "LIMIT 2000", (last,)).fetchall()
            if not rows:
                return
            for r in rows:
                yield self._passage(r[1:])
            last = int(rows[-1][0])

    def ids(self) -> Iterator[str]:
        """Passage ids in row order, streamed."""
        conn = self._conn()
        last = 0
        while True:
            rows = conn.execute("SELECT row, id FROM passages WHERE row > ? ORDER BY row LIMIT 10000",
                                (last,)).fetchall()
            if not rows:
                return
            yield from (str(r[1]) for r in rows)
            last = int(rows[-1][0])

    def texts(self, start: int = 0, stop: int | None = None, batch: int = 5000) -> Iterator[list[str]]:
        """``contents`` (``Title\\ntext``) of rows ``[start, stop)`` in batches."""
        conn = self._conn()
        stop = len(self) if stop is None else stop
        for lo in range(start, stop, batch):
            hi = min(stop, lo + batch)
            yield [f"{t}\n{x}" if t else x for t, x in conn.execute(
                "SELECT title, text FROM passages WHERE row > ? AND row <= ? ORDER BY row", (lo, hi))]

    def sample_titles(self, n: int, seed: int = 0) -> list[str]:
        """``random.Random(seed).sample`` of the sorted distinct titles, read from disk."""
        titles = _Titles(self)
        return random.Random(seed).sample(titles, min(n, len(titles))) if n > 0 else []


class Contents(Sequence[str]):
    """The ``contents`` of every row as a lazy sequence (what the embedder reads during a build)."""

    def __init__(self, store: PassageStore) -> None:
        self.store, self.n = store, len(store)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[str]:
        for batch in self.store.texts(0, self.n):
            yield from batch

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.store.by_rows([int(i)])[0].contents


class _Titles(Sequence[str]):
    """The sorted distinct titles as a lazy sequence (so ``random.sample`` reads only what it picks)."""

    def __init__(self, store: PassageStore) -> None:
        self.store = store
        conn = store._conn()
        try:
            self.n = int(conn.execute("SELECT count(*) FROM titles").fetchone()[0])
            self.table = True
        except sqlite3.OperationalError:  # a store written before titles existed (or mid-build)
            self.table = False
            self.all = [r[0] for r in conn.execute(
                "SELECT DISTINCT title FROM passages WHERE title != '' ORDER BY title")]
            self.n = len(self.all)

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if not self.table:
            return self.all[i]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return str(self.store._conn().execute("SELECT title FROM titles WHERE rank=?", (i + 1,)).fetchone()[0])


__all__ = ["PassageStore", "Contents", "content_key", "FILE"]
