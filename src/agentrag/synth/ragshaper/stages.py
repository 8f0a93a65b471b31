"""RAGShaper's per-item functions, one :class:`StageTask` per stage (explore, qa, elicit, tag).

In the driver's process a task uses the driver's components; pickled to a worker process (the Ray
executor) it rebuilds them there with ``RagShaperComponents.rebuild``, once per process, and opens
K~ with ``open_distractor_kb`` on the distractor passages it carries. Each returns the record(s)
to write; the pipeline (the driver) writes them.

No per-item function catches a failure: model output problems are already flagged records
(:func:`agentrag.synth.common.call_json`), and everything else escapes to the failure policy of
:func:`agentrag.exec.run_stage` (outage -> unfinished, 401/404 -> the run stops, else a bug).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import WorkerTask
from agentrag.kb.base import Retriever
from agentrag.records import Passage, Trajectory
from agentrag.synth.ragshaper import analysis
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.elicit import elicit
from agentrag.synth.ragshaper.qa import synthesize_qa
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    InfoTree,
    PathRecord,
    QARecord,
    SeedRecord,
    TagRecord,
)
from agentrag.synth.ragshaper.tree import InfoCurator
from agentrag.synth.worker import build_once

log = logging.getLogger(__name__)


def _explore_one(state: Any, seed: SeedRecord) -> tuple[InfoTree, list[DistractorDoc]]:
    return state.curator.explore(seed.id, seed.entity)  # type: ignore[no-any-return]


def _qa_one(state: Any, path: PathRecord) -> QARecord:
    by_id = {n.id: n for n in state.data[path.seed_id].nodes}
    return synthesize_qa(state.comps.curator, path, [by_id[i] for i in path.node_ids], state.cfg.qa,
                         seed=state.cfg.seed, verifier=state.comps.verifier or state.comps.curator)


def _elicit_one(state: Any, qa: QARecord) -> Trajectory:
    return elicit(qa, state.comps.teacher, state.comps.main_kb, state.kb_tilde, state.cfg.elicit,
                  seed=state.cfg.seed, types_by_id=state.data, agent_factory=state.comps.agent_factory)


def _tag_one(state: Any, traj: Trajectory) -> TagRecord:
    return analysis.tag_behaviour(state.comps.tagger, traj, state.data[traj.id], seed=state.cfg.seed)


_STAGES: dict[str, Callable[[Any, Any], Any]] = {
    "explore": _explore_one, "qa": _qa_one, "elicit": _elicit_one, "tag": _tag_one}


@dataclass
class _StageState:
    comps: RagShaperComponents
    cfg: RagShaperConfig
    data: Any = None
    curator: InfoCurator | None = None
    kb_tilde: Retriever | None = None


class StageTask(WorkerTask):
    """One stage's per-item function. In the driver's process it uses the driver's components;
    unpickled in a worker process (Ray) it builds them with ``comps.rebuild`` on its first item."""

    def __init__(self, stage: str, cfg: RagShaperConfig, comps: RagShaperComponents, data: Any = None,
                 tilde: tuple[list[Passage], Retriever | None] | None = None) -> None:
        super().__init__()
        self.stage, self.cfg, self.data = stage, cfg, data
        self.rebuild = comps.rebuild
        self.tilde_passages = tilde[0] if tilde else None
        self._state = self._prepare(comps, tilde[1] if tilde else None)

    def _prepare(self, comps: RagShaperComponents, kb_tilde: Retriever | None) -> _StageState:
        curator = (InfoCurator(comps.curator, comps.main_kb, self.cfg, verifier=comps.verifier or comps.curator)
                   if self.stage == "explore" else None)
        return _StageState(comps, self.cfg, self.data, curator, kb_tilde)

    def setup(self) -> _StageState:
        if self.rebuild is None:
            raise UserError("RAGShaper components cannot be rebuilt in a worker process: pass "
                            "RagShaperComponents(rebuild=...) to run on a distributed executor")
        comps = build_once(self.rebuild)  # one build per worker process for all stages of a run
        kb_tilde = None
        if self.tilde_passages:
            kb_tilde = (comps.open_distractor_kb or comps.distractor_kb)(self.tilde_passages)
        return self._prepare(comps, kb_tilde)

    def run(self, state: Any, item: Any) -> Any:
        return _STAGES[self.stage](state, item)


__all__ = ["StageTask"]
