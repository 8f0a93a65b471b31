"""Ranked rows to hits: the passages' rows (from ``passages.sqlite``, or from memory for a small KB)
and the :class:`~agentrag.records.Hit` objects, built without pydantic's per-field work, and
:class:`SearchResults`, the hit lists of one search, built when they are first looked at.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from pydantic import BaseModel

from agentrag.errors import UserError
from agentrag.kb.indexes import Ranking
from agentrag.kb.passages import PassageStore
from agentrag.protocols import apply_threshold
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


#: every hit's ``__pydantic_fields_set__``: all of Hit's fields, so the one set can be shared (see make_hits)
_ALL_FIELDS_SET: set[str] = set(Hit.model_fields)
_SLOTS = vars(BaseModel)
#: the setters of the slots pydantic gives every model (``__dict__`` and three more): called directly,
#: they cost about half of ``object.__setattr__``'s lookup by name
_SET_DICT, _SET_FIELDS, _SET_EXTRA, _SET_PRIVATE = (
    _SLOTS[name].__set__ for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__",
                                      "__pydantic_private__"))


def ranking_rows(ranking: Ranking) -> Iterator[int]:
    """The rows ``ranking`` names (those scoring above 0), for reading their passages (worked out
    only if they are read: a store held in memory does not need them)."""
    if isinstance(ranking, list):
        yield from (r for rs in ranking for r, _ in rs)
    else:
        rows, vals = ranking
        yield from rows[vals > 0].tolist()


def make_hits(ranking: Ranking, found: Sequence[Row] | Mapping[int, Row], method: str,
              kb: str) -> list[list[Hit]]:
    """One hit list per query of ``ranking`` (a list of (row, score) lists, or the numba loop's
    (rows, scores) arrays, entries scoring 0 being no hit), same order: each hit made the way
    ``Hit.model_construct`` makes one, without its per-field work (the passage was validated
    when it was stored): the object, its field dict, and pydantic's three other slots set by
    their descriptors. Building hits is most of a search's cost on a small KB.

    Every hit shares one fields-set holding all of Hit's fields: pydantic only ever adds a
    field's name to it (assigning a field; ``model_copy`` updates its own copy), which changes
    nothing, and one set fewer per hit is one allocation and one object fewer for Python's
    cyclic collector to walk.

    That collector is paused while the hits are built (and resumed, if it ran, before
    returning): on a batch of queries the collections these allocations trigger, each walking
    every tracked object of the process, cost more than building the hits (docs/kb.md). The
    hits hold no cycles (strings, floats, a metadata dict), so pausing frees nothing later than
    it would have been."""
    new, loads = Hit.__new__, json.loads
    set_dict, set_fields, set_extra, set_private = _SET_DICT, _SET_FIELDS, _SET_EXTRA, _SET_PRIVATE
    fields = _ALL_FIELDS_SET
    version = SCHEMA_VERSION
    pairs: Iterable[Iterable[tuple[int, float]]]
    if isinstance(ranking, list):
        pairs, arrays = ranking, False
    else:  # (Python ints and floats; entries scoring 0 are skipped below)
        rows, vals = ranking
        pairs, arrays = map(zip, rows.tolist(), vals.tolist()), True
    out: list[list[Hit]] = []
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        for rs in pairs:
            hits = []
            for r, s in rs:
                if arrays and not s > 0:  # (an entry scoring 0 is no hit)
                    continue
                row = found[r]
                h = new(Hit)
                set_dict(h, {"schema_version": version, "id": row[0], "title": row[1], "text": row[2],
                             "score": float(s), "method": method, "kb": kb,
                             "metadata": loads(row[3]) if row[3] else {}})
                set_fields(h, fields)
                set_extra(h, None)
                set_private(h, None)
                hits.append(h)
            out.append(hits)
    except (IndexError, KeyError) as exc:
        raise UserError(f"an index row ({exc}) has no passage; the KB is damaged, rebuild it") from exc
    finally:
        if collecting:
            gc.enable()
    return out


class SearchResults(Sequence[list[Hit]]):
    """The hits of one search: one ``list[Hit]`` per query, in query order, equal to the list of
    lists an eager search returns (``==`` compares with any sequence of lists; pickling and
    ``copy`` give that plain list).

    The search itself only ranks: the index's rows and scores are kept, and the passages are
    read and the :class:`~agentrag.records.Hit` objects built for every query at once, the first
    time any of them is looked at (indexing, iterating, ``==``, ``repr``), under a lock (several
    threads may read one result). ``len`` needs no hits. A caller that wants only ranks can call
    ``KnowledgeBase.rank`` instead."""

    __slots__ = ("_ranking", "_n", "_rows", "_method", "_kb", "_k", "_threshold", "_hits", "_lock")

    def __init__(self, ranking: Ranking, rows: PassageRows, method: str, kb: str, k: int,
                 threshold: float | None = None) -> None:
        self._ranking = ranking
        self._n = len(ranking) if isinstance(ranking, list) else len(ranking[0])
        self._rows, self._method, self._kb, self._k, self._threshold = rows, method, kb, k, threshold
        self._hits: list[list[Hit]] | None = None
        self._lock = threading.Lock()

    def _built(self) -> list[list[Hit]]:
        hits = self._hits
        if hits is not None:
            return hits
        with self._lock:
            if self._hits is None:
                ranking = self._ranking
                hits = make_hits(ranking, self._rows.lookup(ranking_rows(ranking)), self._method, self._kb)
                if self._threshold is not None:  # ranked lists are best first and at most k long already
                    hits = [apply_threshold(h, self._k, self._threshold) for h in hits]
                self._hits = hits
            return self._hits

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> list[Hit]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[Hit]]: ...

    def __getitem__(self, i: int | slice) -> list[Hit] | list[list[Hit]]:
        return self._built()[i]

    def __iter__(self) -> Iterator[list[Hit]]:
        return iter(self._built())

    def __reversed__(self) -> Iterator[list[Hit]]:
        return reversed(self._built())

    def __contains__(self, value: object) -> bool:
        return value in self._built()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SearchResults):
            other = other._built()
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return self._built() == list(other)

    __hash__ = None  # type: ignore[assignment]  # unhashable, like the list it stands for

    def __add__(self, other: Sequence[list[Hit]]) -> list[list[Hit]]:
        return self._built() + list(other)

    def __radd__(self, other: Sequence[list[Hit]]) -> list[list[Hit]]:
        return list(other) + self._built()

    def __repr__(self) -> str:
        return repr(self._built())

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (self._built(),))


__all__ = ["PassageRows", "make_hits", "ranking_rows", "cache_bytes", "CACHE_MB", "SearchResults"]
