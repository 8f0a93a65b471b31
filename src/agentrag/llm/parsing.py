"""Tolerant parsing of model output: JSON objects and tool calls written as text.

Servers without a tool-call parser (and small models) often return tool calls inside the
message text, either hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
or as a bare JSON object. These helpers turn such text into :class:`ToolCall` records.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentrag.errors import ParseError
from agentrag.protocol import json_objects, parse_tool_calls, split_think
from agentrag.records import Message, ToolCall

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def strip_think(text: str | None) -> str | None:
    """``text`` without its reasoning (see :func:`split_think`)."""
    return split_think(text)[0]


def reasoning_of(raw: Any) -> str | None:
    """The reasoning a server returned beside the content (``message.reasoning_content``, as
    DeepSeek and vLLM's reasoning parsers send it, or ``message.reasoning``) in a raw choice."""
    message = raw.get("message") if isinstance(raw, dict) else None
    if not isinstance(message, dict):
        return None
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def parse_json_output(text: str | None) -> dict[str, Any]:
    """Extract the JSON object a model meant to return.

    Accepts plain JSON, JSON inside a Markdown code fence, or JSON surrounded by prose (the
    first decodable object wins). Raises :class:`ParseError` when there is no JSON object.
    """
    text = strip_think(text)  # a reasoning model's <think> block may hold braces of its own
    if text is None or not text.strip():
        raise ParseError("expected a JSON object but the model returned no text", is_retryable=True)
    stripped = text.strip()
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        return obj
    for block in _FENCE.findall(stripped):
        try:
            obj = json.loads(block.strip())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    objects = json_objects(stripped)
    if objects:
        return objects[0]
    snippet = stripped if len(stripped) <= 200 else stripped[:200] + "..."
    raise ParseError(f"no JSON object found in model output: {snippet!r}", is_retryable=True)


def tool_names_of(tools: list[dict[str, Any]] | None) -> set[str]:
    """Names of OpenAI function tools."""
    names = set()
    for t in tools or []:
        fn = t.get("function", t)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def parse_text_tool_calls(text: str | None, tools: list[dict[str, Any]] | None) -> tuple[str | None, list[ToolCall]]:
    """Split ``text`` into (remaining text, tool calls) for hermes tags or a bare JSON call, with
    the one parser of :func:`agentrag.protocol.parse_tool_calls` (the agents use it too).

    Only calls naming one of ``tools`` are accepted (any name when ``tools`` lists none).
    Returns the text unchanged and no calls when nothing parses. A reasoning model's
    ``<think>`` block is not parsed for calls; it stays, tagged, at the front of the remaining text
    (the agent moves it to the step's ``reasoning``).
    """
    found = parse_tool_calls(text, tool_names_of(tools))
    if not found.calls:
        return text, []
    return found.rest, found.calls


def message_from_openai(data: dict[str, Any]) -> Message:
    """An OpenAI chat message dict as a :class:`Message` (tool arguments parsed from JSON)."""
    calls = []
    for i, tc in enumerate(data.get("tool_calls") or []):
        fn = tc.get("function", {})
        args = fn.get("arguments") or "{}"
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError as exc:
                raise ParseError(f"tool call {fn.get('name')!r}: arguments are not JSON: {args!r}",
                                 is_retryable=True) from exc
        calls.append(ToolCall(id=tc.get("id") or f"call_{i}", name=fn.get("name", ""), arguments=args))
    content = data.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return Message(role=data.get("role", "user"), content=content, tool_calls=calls,
                   tool_call_id=data.get("tool_call_id"), name=data.get("name"))


def schema_of(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema inside an OpenAI ``response_format`` (``{}`` for plain json_object mode)."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema")
        return dict(schema) if isinstance(schema, dict) else {}
    if kind == "json_object":
        schema = response_format.get("schema")
        return dict(schema) if isinstance(schema, dict) else {}
    return None


__all__ = ["split_think", "strip_think", "reasoning_of", "parse_json_output", "parse_text_tool_calls", "message_from_openai", "tool_names_of", "schema_of"]
