"""Agents: the loop, the paper protocols, tools and navigation policies."""

from agentrag.agents.base import Agent, NavigationPolicy, Tool, ToolResult

__all__ = ["Agent", "NavigationPolicy", "Tool", "ToolResult"]
