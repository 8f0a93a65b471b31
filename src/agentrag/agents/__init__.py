"""Agents: the loop, the paper protocols, tools and navigation policies.

``build_agent(name, llm, retriever_or_policy, **config)`` makes one of ``react``, ``plan_step``,
``reason_ground``, ``search_r1``, ``planner_executor``, or a baseline: ``naive``, ``standard_rag``,
``ircot``, ``iter_retgen``; ``agent.run(item)`` returns a Trajectory and never raises for
model misbehaviour. See docs/agents.md.
"""

from agentrag.agents.base import Agent, NavigationPolicy, Tool, ToolResult
from agentrag.agents.config import (
    AgentConfig,
    IrcotConfig,
    IterRetGenConfig,
    NaiveConfig,
    PlanStepConfig,
    ReactConfig,
    ReasonGroundConfig,
    SearchR1Config,
    StandardRagConfig,
)
from agentrag.agents.ircot import IrcotAgent
from agentrag.agents.iter_retgen import IterRetGenAgent
from agentrag.agents.loop import BaseAgent
from agentrag.agents.messages import messages_to_trajectory, trajectory_to_messages
from agentrag.agents.naive import NaiveAgent
from agentrag.agents.navigation import ConstrainedNavigation, PlainNavigation, is_distractor
from agentrag.agents.plan_step import PlanStepAgent, plan_step_tools
from agentrag.agents.react import ReactAgent, react_system_prompt
from agentrag.agents.reason_ground import ReasonGroundAgent
from agentrag.agents.registry import AGENTS, BASELINES, agent_config, build_agent, run_many
from agentrag.agents.search_r1 import SearchR1Agent
from agentrag.agents.standard_rag import StandardRagAgent
from agentrag.agents.tools import RetrievalTool, format_documents, search_tool_schema

__all__ = [
    "Agent", "NavigationPolicy", "Tool", "ToolResult",
    "AgentConfig", "ReactConfig", "PlanStepConfig", "ReasonGroundConfig", "SearchR1Config",
    "NaiveConfig", "StandardRagConfig", "IrcotConfig", "IterRetGenConfig",
    "BaseAgent",
    "trajectory_to_messages", "messages_to_trajectory",
    "PlainNavigation", "ConstrainedNavigation", "is_distractor",
    "ReactAgent", "PlanStepAgent", "ReasonGroundAgent", "SearchR1Agent",
    "NaiveAgent", "StandardRagAgent", "IrcotAgent", "IterRetGenAgent",
    "react_system_prompt", "plan_step_tools",
    "AGENTS", "BASELINES", "build_agent", "agent_config", "run_many",
    "RetrievalTool", "format_documents", "search_tool_schema",
]
