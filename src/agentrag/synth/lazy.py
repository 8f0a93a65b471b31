"""Stage records read when they are needed, not held for a whole stage (bounded memory), shared
by the synthesizers.

A stage's work list holds ids, and the records are read from their stage file by byte offset
when an item runs: one record per item in flight. :class:`StageIndex` maps a record id to its
line (the first line with the id, as :class:`~agentrag.runs.JsonlStore` reads it);
:class:`StageGroups` maps a field of the records (e.g. ``item_id``) to the lines of every record
with that value, in file order. Both pickle as plain data (a path, a model class, a dict of
offsets), so a Ray worker reads the run directory as it already does for its inputs.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentrag.runs import JsonlStore, parse_timed, read_timings

R = TypeVar("R", bound=BaseModel)

#: the id at the start of a compact record line (``dump_record``: schema_version, then id)
_ID = re.compile(rb'\{(?:"schema_version":\d+,)?"id":"((?:[^"\\]|\\.)+)"[,}]')


def _line_id(raw: bytes) -> str:
    m = _ID.match(raw)
    if m is not None and b"\\" not in m.group(1):
        return m.group(1).decode("utf-8")
    return str(json.loads(raw).get("id"))


def _lines(path: str) -> Iterator[tuple[int, int, bytes]]:
    """``(byte offset, line number, line)`` of every complete, non-blank line."""
    pos = 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if raw.endswith(b"\n") and raw.strip():
                yield pos, lineno, raw
            pos += len(raw)


def _read(path: str, model: type[R], pos: int, lineno: int, timings: dict[str, Any]) -> R:
    """The record on the line at ``pos``, with its timings put back (a finished stage file's)."""
    with open(path, "rb") as fh:
        fh.seek(pos)
        raw = fh.readline()
    return parse_timed(model, raw.decode("utf-8"), timings, path, lineno)


@dataclass(frozen=True)
class Ref:
    """A work item that names its record by id (``id``: what the failure policy reports)."""

    id: str


class StageIndex(Generic[R]):
    """``index[id]``: the record of a stage file with that id, read from the file (the first line
    with the id, as :class:`~agentrag.runs.JsonlStore` reads it). Holds only byte offsets, of the
    ``ids`` given (all when None). With ``grow``, an id not indexed yet is looked for in the lines
    written since (a record the driver wrote after the index was made: a stage that overlaps the
    one writing the file, :meth:`~agentrag.synth.driver.SynthRun.flow`)."""

    def __init__(self, path: str | os.PathLike[str], model: type[R], ids: Collection[str] | None = None, *,
                 grow: bool = False) -> None:
        self.path, self.model, self.grow = str(path), model, grow
        self.offsets: dict[str, tuple[int, int]] = {}  # id -> (byte offset, line number)
        self.timings = read_timings(self.path)  # a finished stage file's timings, put back on reading
        self.end = self.lines = 0  # how far the file was read (bytes, whole lines)
        self._lock = threading.Lock()
        self._scan(ids)

    def _scan(self, ids: Collection[str] | None) -> None:
        """Index the whole lines written since the last scan (of ``ids``, all when None)."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.end)
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # a line being written: read it on a later scan
                self.lines += 1
                if raw.strip():
                    key = _line_id(raw)
                    if key not in self.offsets and (ids is None or key in ids):
                        self.offsets[key] = (self.end, self.lines)
                self.end += len(raw)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        return key in self.offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, key: str) -> R:
        if key not in self.offsets and self.grow:  # written after the index was made (a flow's follow-up)
            with self._lock:
                self._scan(None)
        return _read(self.path, self.model, *self.offsets[key], self.timings)

    def get(self, key: str) -> R | None:
        if key not in self.offsets and self.grow:
            with self._lock:
                self._scan(None)
        return self[key] if key in self.offsets else None


class StageGroups(Generic[R]):
    """``groups[value]``: the records of a stage file whose ``field`` is ``value`` (in file order,
    the first line of each record id, as :class:`~agentrag.runs.JsonlStore` reads them), read
    from the file. Keys iterate in the order of their first record. Holds only byte offsets, and
    in ``marked`` the keys with a record whose field ``mark`` is true (e.g. a path's ``last``)."""

    def __init__(self, path: str | os.PathLike[str], model: type[R], field: str = "item_id",
                 mark: str | None = None) -> None:
        self.path, self.model = str(path), model
        self.offsets: dict[str, list[tuple[int, int]]] = {}
        self.marked: set[str] = set()
        self.timings = read_timings(self.path)
        seen: set[str] = set()
        for pos, lineno, raw in _lines(self.path):
            obj = json.loads(raw)
            rid = str(obj.get("id"))
            if rid in seen:
                continue
            seen.add(rid)
            key = str(obj.get(field))
            self.offsets.setdefault(key, []).append((pos, lineno))
            if mark is not None and obj.get(mark):
                self.marked.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self.offsets

    def __iter__(self) -> Iterator[str]:
        return iter(self.offsets)

    def __getitem__(self, key: str) -> list[R]:
        return [_read(self.path, self.model, pos, lineno, self.timings) for pos, lineno in self.offsets.get(key, [])]


class Selected(Generic[R]):
    """The records of a stage file that ``keep`` selects, read anew on each iteration (a pass
    reads the file record by record: nothing is held between or during passes)."""

    def __init__(self, store: JsonlStore[R], keep: Callable[[R], bool]) -> None:
        self.store, self.keep = store, keep

    def __iter__(self) -> Iterator[R]:
        return (r for r in self.store if self.keep(r))


__all__ = ["Ref", "StageIndex", "StageGroups", "Selected"]
