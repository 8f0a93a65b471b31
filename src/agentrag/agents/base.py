"""Agent-side seams: tools, navigation policies and the agent protocol (DESIGN §3)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from agentrag.records import Hit, QAItem, Trajectory


class ToolResult(BaseModel):
    """What a tool returns: the observation text the model sees, plus structured hits."""

    observation: str
    hits: list[Hit] = Field(default_factory=list)
    error: str | None = None


@runtime_checkable
class Tool(Protocol):
    """A callable tool: ``name``, an OpenAI function ``schema`` and ``__call__(arguments)``."""

    name: str
    schema: dict[str, Any]

    def __call__(self, arguments: dict[str, Any]) -> ToolResult: ...


@runtime_checkable
class NavigationPolicy(Protocol):
    """Decides which knowledge base(s) a retrieval call reads, given the step number (1-based)
    and what the previous step returned. The agent never sees which KB a hit came from."""

    def search(self, query: str, k: int, step: int, previous_hits: list[Hit]) -> list[Hit]: ...


@runtime_checkable
class Agent(Protocol):
    """Runs one question to a trajectory; never raises on model misbehaviour (the trajectory's
    ``finish_reason`` records it)."""

    name: str

    def run(self, item: QAItem) -> Trajectory: ...


__all__ = ["ToolResult", "Tool", "NavigationPolicy", "Agent"]
