"""RAGShaper's per-item functions, one :class:`StageTask` per stage (explore, qa, elicit, tag).

In the driver's process a task uses the driver's components; pickled to a worker process (the Ray
executor) it rebuilds them there with ``RagShaperComponents.rebuild``, once per process, and opens
K~ with ``open_distractor_kb`` on the distractor passages it carries. Each returns the record(s)
to write; the pipeline (the driver) writes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.errors import LLMError, RetrievalError, RunError, UserError
from agentrag.exec import WorkerTask
from agentrag.kb.base import Retriever
from agentrag.records import Passage, Provenance, Trajectory
from agentrag.synth.ragshaper import analysis
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

if TYPE_CHECKING:
    from agentrag.synth.ragshaper.pipeline import RagShaperComponents

log = logging.getLogger(__name__)



def is_outage(exc: BaseException | None) -> bool:
    """An LLM or retrieval failure worth retrying later (a 5xx, a timeout, a lost connection after
    the backend's own retries): the item stays unfinished, it is not data."""
    return isinstance(exc, (LLMError, RetrievalError)) and exc.is_retryable


def is_unfinished(exc: BaseException | None) -> bool:
    """A failure that leaves its item unfinished for the next run: an outage, or a lost worker
    (the executor's retryable :class:`RunError`)."""
    return isinstance(exc, RunError) and exc.is_retryable


def _is_outage_or_raise(exc: BaseException) -> None:
    """Inside a per-item function: re-raise an outage (the item stays unfinished)."""
    if is_outage(exc):
        raise exc


def _explore_one(state: Any, seed: SeedRecord) -> tuple[InfoTree, list[DistractorDoc]]:
    start = time.monotonic()
    try:
        tree, docs = state.curator.explore(seed.id, seed.entity)
    except Exception as exc:  # noqa: BLE001 - one seed's failure is recorded, the run goes on
        _is_outage_or_raise(exc)
        log.exception("seed %r: exploration failed", seed.entity)
        tree, docs = InfoTree(id=seed.id, seed=seed.entity, status="failed",
                              error=f"{type(exc).__name__}: {exc}", elapsed=time.monotonic() - start), []
    return tree, docs


def _qa_one(state: Any, path: PathRecord) -> QARecord:
    by_id = {n.id: n for n in state.data[path.seed_id].nodes}
    try:
        rec = synthesize_qa(state.comps.curator, path, [by_id[i] for i in path.node_ids], state.cfg.qa,
                            seed=state.cfg.seed)
    except Exception as exc:  # noqa: BLE001
        _is_outage_or_raise(exc)
        log.exception("path %s: QA synthesis failed", path.id)
        rec = QARecord(id=f"{path.id}-qa", path_id=path.id, seed_id=path.seed_id, status="rejected",
                       reason=f"error: {type(exc).__name__}: {exc}", provenance=Provenance(stage="qa"))
    return rec


def _elicit_one(state: Any, qa: QARecord) -> Trajectory:
    try:
        traj = elicit(qa, state.comps.teacher, state.comps.main_kb, state.kb_tilde, state.cfg.elicit,
                      seed=state.cfg.seed, types_by_id=state.data, agent_factory=state.comps.agent_factory)
    except Exception as exc:  # noqa: BLE001
        _is_outage_or_raise(exc)
        log.exception("question %s: elicitation failed", qa.id)
        traj = Trajectory(id=f"{qa.id}-t", question=qa.question, finish_reason="llm_error",
                          metadata={"qa_id": qa.id, "seed_id": qa.seed_id, "gold_answer": qa.answer,
                                    "error": f"{type(exc).__name__}: {exc}", "distractors_met": [],
                                    "distractor_types_met": [], "tool_calls": 0})
    return traj


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
        curator = InfoCurator(comps.curator, comps.main_kb, self.cfg) if self.stage == "explore" else None
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


__all__ = ["StageTask", "is_outage", "is_unfinished"]
