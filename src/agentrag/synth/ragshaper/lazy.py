"""Stage records read when a worker needs them, not held for a whole stage (bounded memory).

Holding every record a stage needs (every tree for QA synthesis, every accepted question for
elicitation, every trajectory and filter decision for the tagger) would keep the largest
records of the run in memory at once. Here the work list holds :class:`Ref` ids,
and the records are read from their stage file by byte offset (:class:`StageIndex`) when an
item runs: one record per item in flight. Both pickle as plain data (a path, a model class, a
dict of offsets), so a Ray worker reads the run directory as it already does for K~.
:class:`Ref` and :class:`StageIndex` live in :mod:`agentrag.synth.lazy` (shared with EviPath).
"""

from __future__ import annotations

from typing import Any

from agentrag.synth.lazy import Ref, StageIndex
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.stages import StageTask


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
