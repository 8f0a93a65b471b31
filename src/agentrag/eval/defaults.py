"""Defaults of an evaluation that depend on the backend its ``--llm`` names: one home for the CLI
and :func:`agentrag.eval.run.run_eval` alike, so ``run_eval(llm="embedded")`` runs with the
settings ``agentrag eval --llm embedded`` does."""

from __future__ import annotations

from typing import Any

from agentrag.errors import UserError

#: agent settings the embedded model (SmolLM2-135M on llama.cpp, 2 CPU cores) gets unless set: fewer
#: turns and shorter prompts keep an eval question at about a minute instead of several. An agent's
#: config may keep its own defaults (``AgentConfig.keep_on_cpu``): planner_executor keeps max_steps
#: and top_k, so a 4-hop path it was trained on (4 searches and an answer turn) fits
EMBEDDED_AGENT_BUDGET: dict[str, Any] = {"max_steps": 4, "top_k": 3, "max_top_k": 3}


def is_embedded(llm: Any) -> bool:
    """Whether an ``--llm`` value names the embedded model, or an LLM object is the embedded
    backend (also behind a response cache). A reference that does not parse does not: the input
    checks report it."""
    from agentrag.llm.reference import parse_llm_ref

    if not isinstance(llm, str):
        from agentrag.llm.embedded import EmbeddedLLM

        return isinstance(llm, EmbeddedLLM) or isinstance(getattr(llm, "inner", None), EmbeddedLLM)
    try:
        return parse_llm_ref(llm).is_embedded
    except (UserError, OSError):
        return False


def resolved_eval_config(cfg: Any, llm: Any = None) -> Any:
    """``cfg`` with its agent's settings resolved: ``agent_config`` holds every key of the agent's
    config class (its defaults included, and with an embedded LLM the CPU budgets of
    :data:`EMBEDDED_AGENT_BUDGET` for the keys left unset, except those the agent keeps:
    ``planner_executor`` keeps the budgets its EviPath training data fits), as ``--print-config`` and
    ``config.yaml`` show it. ``llm``: the LLM object the run was given in place of ``cfg.llm``
    (its backend decides the budgets then). Resolving twice changes nothing."""
    from agentrag.agents import agent_config
    from agentrag.config import config_source

    given = dict(cfg.agent_config)
    cls = type(agent_config(cfg.agent))
    fields = cls.model_fields
    if is_embedded(cfg.llm if llm is None else llm):  # CPU budgets for the keys the user left unset (docs/quickstart.md)
        for key, value in EMBEDDED_AGENT_BUDGET.items():
            if key in fields and key not in given and key not in cls.keep_on_cpu:
                given[key] = value
    full = agent_config(cfg.agent, source=config_source(cfg), prefix="agent_config.", **given).model_dump(mode="json")
    return cfg.model_copy(update={"agent_config": full})


__all__ = ["EMBEDDED_AGENT_BUDGET", "is_embedded", "resolved_eval_config"]
