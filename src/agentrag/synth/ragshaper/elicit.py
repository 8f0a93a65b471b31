"""Behavior elicitation (§3.3, Eq. 7-8): a teacher agent solves each accepted question while
its one dense retrieval tool follows constrained navigation over K and the distractor KB K~.

The teacher is never told K~ exists (its hits look like any other document); the trajectory
records, per step, which hits came from K~ and their distractor type.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from agentrag.errors import ContextLimitError, LLMError, RunError
from agentrag.kb.base import Retriever
from agentrag.kb.routing import MethodRetriever  # its home is kb; re-exported here for compatibility
from agentrag.llm.base import LLM, Completion
from agentrag.records import Message, QAItem, Trajectory
from agentrag.synth.common import prompt_hash
from agentrag.synth.ragshaper.config import ElicitConfig
from agentrag.synth.ragshaper.filter import answer_format_error
from agentrag.synth.ragshaper.schema import QARecord

log = logging.getLogger(__name__)

AgentFactory = Callable[[LLM, Any, ElicitConfig], Any]


def teacher_settings(cfg: ElicitConfig, seed: int | None = None) -> dict[str, Any]:
    """The agent settings of the teacher: budget, sampling, no cap on the top_k it asks for (the
    paper's tool, Fig. 10, has ``minimum: 1`` and no maximum) and, for ``react``, the rollout
    prompt and the paper's tool name (Figs. 10 and 13) unless ``cfg.prompt`` is 'evaluation'."""
    out: dict[str, Any] = {"max_steps": cfg.max_steps, "top_k": cfg.top_k, "max_tokens": cfg.max_tokens,
                           "temperature": cfg.temperature, "seed": seed, "max_top_k": None}
    if cfg.agent == "react" and cfg.prompt == "rollout":
        from agentrag.agents.rollout import ROLLOUT_SYSTEM, ROLLOUT_TOOL

        out.update(tool_name=ROLLOUT_TOOL, system_prompt=ROLLOUT_SYSTEM)
    return out


def default_agent_factory(llm: LLM, policy: Any, cfg: ElicitConfig, seed: int | None = None) -> Any:
    """``build_agent(cfg.agent, llm, policy, ...)`` from the agents area, with :func:`teacher_settings`."""
    from agentrag.agents import build_agent

    return build_agent(cfg.agent, llm, policy, **teacher_settings(cfg, seed))


class OutageWatch:
    """Remembers the first LLM or retrieval failure that passed through the teacher's LLM or
    retrievers. The agent may turn a retrieval error into an error observation;
    :func:`elicit` re-raises it instead, so the failure policy decides (an outage leaves the
    question unfinished, a 401/404 stops the run). A request over the model's context window is
    data: it is remembered apart (``context``) and the trajectory is flagged ``context_limit``."""

    def __init__(self) -> None:
        self.error: RunError | None = None
        self.context: ContextLimitError | None = None
        self._lock = threading.Lock()

    def note(self, exc: RunError) -> None:
        with self._lock:
            if isinstance(exc, ContextLimitError):
                self.context = self.context or exc
            else:
                self.error = self.error or exc


class _WatchedLLM:
    def __init__(self, inner: LLM, watch: OutageWatch) -> None:
        self.inner, self.watch = inner, watch
        self.model = getattr(inner, "model", "")

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        try:
            return self.inner.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)
        except LLMError as exc:
            self.watch.note(exc)
            raise

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        return self.chat(messages, tools=tools, response_format=response_format, n=n, **sampling)


def navigation_policy(main: Retriever, distractor: Retriever | None, cfg: ElicitConfig,
                      rng: random.Random, watch: OutageWatch | None = None) -> Any:
    """Eq. 8 constrained navigation, or plain R(K, k) when there is no K~ (the ablation).
    Both KBs are read with ``cfg.method`` so that merged scores are comparable."""
    from agentrag.agents.navigation import ConstrainedNavigation, PlainNavigation

    main = MethodRetriever(main, cfg.method, watch)
    if distractor is not None:
        distractor = MethodRetriever(distractor, cfg.method, watch)

    if distractor is None:
        return PlainNavigation(main, threshold=cfg.threshold)
    return ConstrainedNavigation(main, distractor, k_distractor=cfg.k_distractor, p_e=cfg.p_e, rng=rng,
                                 threshold=cfg.threshold)


def distractor_hits(traj: Trajectory, types_by_id: dict[str, str]) -> list[dict[str, Any]]:
    """Every K~ document the teacher met: step, passage id and distractor type."""
    from agentrag.agents.navigation import is_distractor

    met = []
    for i, step in enumerate(traj.steps, start=1):
        for h in step.hits:
            if is_distractor(h) or h.id in types_by_id:
                dtype = h.metadata.get("distractor_type") or types_by_id.get(h.id, "unknown")
                met.append({"step": i, "id": h.id, "distractor_type": dtype})
    return met


def elicit(qa: QARecord, teacher: LLM, main: Retriever, distractor: Retriever | None, cfg: ElicitConfig,
           *, seed: int, types_by_id: dict[str, str], agent_factory: AgentFactory | None = None) -> Trajectory:
    """Run the teacher on ``qa``; the returned trajectory carries the K~ documents it met.
    Re-raises an LLM or retrieval failure that hit the teacher (an outage: the question is redone
    on rerun; a 401/404: the run stops) instead of yielding a broken trajectory. A request over the
    teacher's context window ends the trajectory with ``finish_reason="context_limit"`` flagged
    ``metadata["error"] = "context_limit: ..."``."""
    rng = random.Random(f"{seed}:{qa.id}")
    watch = OutageWatch()
    policy = navigation_policy(main, distractor, cfg, rng, watch)
    llm: Any = _WatchedLLM(teacher, watch)
    agent = agent_factory(llm, policy, cfg) if agent_factory else default_agent_factory(llm, policy, cfg, seed)
    item = QAItem(id=qa.id, question=qa.question, golden_answers=[qa.answer])
    traj: Trajectory = agent.run(item)
    if watch.error is not None:
        raise watch.error
    met = distractor_hits(traj, types_by_id)
    meta = dict(traj.metadata)
    if traj.finish_reason == "context_limit":  # a flagged record (data), not an outage
        meta["error"] = f"context_limit: {watch.context or meta.get('error', 'over the context window')}"
    form = answer_format_error(traj)
    if form is not None:  # flagged: the filter drops it, it is never exported as SFT data
        meta["flagged"] = "answer_not_in_format"
        meta["answer_format_error"] = form
    meta.update({
        "qa_id": qa.id, "seed_id": qa.seed_id, "gold_answer": qa.answer,
        "distractors_met": met,
        "distractor_types_met": sorted({m["distractor_type"] for m in met}),
        "tool_calls": sum(1 for s in traj.steps if s.action is not None),
        "navigation": "constrained" if distractor is not None else "plain",
        "provenance": {"stage": "elicit", "model": getattr(teacher, "model", ""),
                       "prompt_hash": prompt_hash(traj.messages[:2]) if traj.messages else "",
                       "usage": traj.usage.model_dump()},
    })
    return traj.model_copy(update={"id": f"{qa.id}-t", "metadata": meta})


__all__ = ["elicit", "MethodRetriever", "navigation_policy", "distractor_hits", "default_agent_factory", "AgentFactory",
           "OutageWatch", "teacher_settings"]
