"""Stage records read when a worker needs them, not held for a whole stage (issue 27, part 3:
peak memory).

A stage's work list used to hold every record it needed (every tree for QA synthesis, every
accepted question for elicitation, every trajectory and filter decision for the tagger): the
largest records of the run, all in memory at once. Here the work list holds :class:`Ref` ids,
and the records are read from their stage file by byte offset (:class:`StageIndex`) when an
item runs: one record per item in flight. Both pickle as plain data (a path, a model class, a
dict of offsets), so a Ray worker reads the run directory as it already does for K~.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentrag.records import parse_record
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.stages import StageTask

R = TypeVar("R", bound=BaseModel)

#: the id at the start of a compact record line (``dump_record``: schema_version, then id)
_ID = re.compile(rb'\{(?:"schema_version":\d+,)?"id":"((?:[^"\\]|\\.)+)"[,}]')


def _line_id(raw: bytes) -> str:
    m = _ID.match(raw)
    if m is not None and b"\\" not in m.group(1):
        return m.group(1).decode("utf-8")
    return str(json.loads(raw).get("id"))


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
        pos, lineno = self.offsets[key]
        with open(self.path, "rb") as fh:
            fh.seek(pos)
            raw = fh.readline()
        return parse_record(self.model, raw.decode("utf-8"), path=self.path, lineno=lineno)


class ReadTask(StageTask):
    """A :class:`StageTask` over :class:`Ref` items: each item's record is read from ``records``
    (a :class:`StageIndex`) when it runs."""

    def __init__(self, stage: str, cfg: RagShaperConfig, comps: RagShaperComponents, records: StageIndex[Any],
                 **kw: Any) -> None:
        super().__init__(stage, cfg, comps, **kw)
        self.records = records

    def run(self, state: Any, item: Any) -> Any:
        return super().run(state, self.records[item.id])


__all__ = ["Ref", "StageIndex", "ReadTask"]
