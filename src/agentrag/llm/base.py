"""The LLM protocol every agent and synthesizer talks to (DESIGN §3)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from agentrag.records import Message, ToolCall, Usage


class Completion(BaseModel):
    """One sampled completion: text and/or tool calls, why it stopped, tokens, latency, raw response."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    latency: float = 0.0
    raw: Any = None

    def as_message(self) -> Message:
        """The completion as an assistant chat message."""
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


@runtime_checkable
class LLM(Protocol):
    """``chat`` returns ``n`` completions for a list of chat messages.

    ``tools`` are OpenAI function-tool dicts; ``response_format`` is an OpenAI response_format
    dict (e.g. ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}``).
    Sampling keywords: temperature, top_p, max_tokens, stop, seed.
    """

    model: str

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        n: int = 1,
        **sampling: Any,
    ) -> list[Completion]: ...

    async def achat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        n: int = 1,
        **sampling: Any,
    ) -> list[Completion]: ...


__all__ = ["Completion", "LLM"]
