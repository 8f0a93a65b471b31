"""``build_agent`` by protocol name, and ``run_many`` to run an agent over many questions."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from agentrag.agents.base import NavigationPolicy
from agentrag.agents.config import AgentConfig
from agentrag.agents.ircot import IrcotAgent
from agentrag.agents.iter_retgen import IterRetGenAgent
from agentrag.agents.loop import BaseAgent
from agentrag.agents.naive import NaiveAgent
from agentrag.agents.navigation import PlainNavigation
from agentrag.agents.plan_step import PlanStepAgent
from agentrag.agents.planner_executor import PlannerExecutorAgent
from agentrag.agents.react import ReactAgent
from agentrag.agents.reason_ground import ReasonGroundAgent
from agentrag.agents.search_r1 import SearchR1Agent
from agentrag.agents.standard_rag import StandardRagAgent
from agentrag.config import load_config
from agentrag.errors import UserError
from agentrag.llm.base import LLM
from agentrag.protocols import Retriever
from agentrag.records import QAItem, Trajectory

AGENTS: dict[str, type[BaseAgent]] = {
    "react": ReactAgent,
    "plan_step": PlanStepAgent,
    "reason_ground": ReasonGroundAgent,
    "search_r1": SearchR1Agent,
    "planner_executor": PlannerExecutorAgent,
    # the papers' non-agentic baselines (fixed retrieval pipelines; docs/agents.md)
    "naive": NaiveAgent,
    "standard_rag": StandardRagAgent,
    "ircot": IrcotAgent,
    "iter_retgen": IterRetGenAgent,
}
#: the non-agentic baselines among AGENTS
BASELINES = ("naive", "standard_rag", "ircot", "iter_retgen")


def agent_config(name: str, *, source: str | None = None, prefix: str = "", **config: Any) -> AgentConfig:
    """The typed config of agent ``name`` from keyword values (typos fail, listing valid keys).
    ``source`` and ``prefix`` say where the values came from in an error (e.g. ``"run.yaml"`` and
    ``"agent_config."`` for the ``agent_config`` section of an eval config)."""
    if name not in AGENTS:
        raise UserError(f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}")
    return load_config(AGENTS[name].config_class, base=config, source=source, prefix=prefix)


def build_agent(name: str, llm: LLM, retriever: Retriever | NavigationPolicy,
                config: AgentConfig | None = None, **overrides: Any) -> BaseAgent:
    """An agent of protocol ``name`` (react, plan_step, reason_ground, search_r1, planner_executor) or
    a baseline (naive, standard_rag, ircot, iter_retgen).

    ``retriever`` is a Retriever (wrapped in :class:`PlainNavigation` with ``threshold``) or a
    NavigationPolicy (used as is; it applies its own threshold). Settings come from ``config``
    (an instance of the agent's config class) and/or keyword overrides such as ``max_steps=5``.
    """
    if name not in AGENTS:
        raise UserError(f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}")
    cls = AGENTS[name]
    if config is not None and not isinstance(config, cls.config_class):
        raise UserError(f"agent {name!r} takes a {cls.config_class.__name__}, got {type(config).__name__}")
    base = config.model_dump() if config is not None else {}
    cfg = load_config(cls.config_class, base={**base, **overrides})
    if _is_policy(retriever):
        navigation: NavigationPolicy = retriever  # type: ignore[assignment]
    elif hasattr(retriever, "search"):
        navigation = PlainNavigation(retriever, threshold=cfg.threshold)  # type: ignore[arg-type]
    else:
        raise UserError(f"build_agent: {type(retriever).__name__} is neither a Retriever nor a NavigationPolicy")
    return cls(llm, navigation, cfg)


def _is_policy(obj: object) -> bool:
    """Navigation policies take ``(query, k, step, previous_hits)``; retrievers take ``(queries, k, ...)``."""
    search = getattr(obj, "search", None)
    if search is None:
        return False
    try:
        params = inspect.signature(search).parameters
    except (TypeError, ValueError):
        return False
    return "step" in params and "previous_hits" in params


def run_many(agent: Any, items: Iterable[QAItem], concurrency: int = 4,
             on_result: Callable[[QAItem, Trajectory], None] | None = None) -> list[Trajectory]:
    """Run ``agent.run`` over ``items`` on ``concurrency`` threads; results come back in input
    order. ``on_result(item, trajectory)`` is called in the caller's thread as each finishes (in
    completion order), e.g. to append to a JsonlStore. An exception from ``agent.run`` (agents
    only raise for infrastructure failures) cancels the pending items and is re-raised."""
    items = list(items)
    if concurrency < 1:
        raise UserError(f"run_many: concurrency={concurrency!r} must be at least 1")
    results: list[Trajectory | None] = [None] * len(items)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agentrag-agent") as pool:
        futures: dict[Future[Trajectory], int] = {pool.submit(agent.run, it): i for i, it in enumerate(items)}
        try:
            for fut in as_completed(futures):
                traj = fut.result()
                idx = futures[fut]
                results[idx] = traj
                if on_result is not None:
                    on_result(items[idx], traj)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return [r for r in results if r is not None]


__all__ = ["AGENTS", "BASELINES", "build_agent", "agent_config", "run_many"]
