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
from agentrag.records import Message, ToolCall

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object that can be decoded from ``text``, left to right."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return found
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = end


def parse_json_output(text: str | None) -> dict[str, Any]:
    """Extract the JSON object a model meant to return.

    Accepts plain JSON, JSON inside a Markdown code fence, or JSON surrounded by prose (the
    first decodable object wins). Raises :class:`ParseError` when there is no JSON object.
    """
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
    objects = _json_objects(stripped)
    if objects:
        return objects[0]
    snippet = stripped if len(stripped) <= 200 else stripped[:200] + "..."
    raise ParseError(f"no JSON object found in model output: {snippet!r}", is_retryable=True)


def _as_call(obj: dict[str, Any], tool_names: set[str], index: int) -> ToolCall | None:
    """A ToolCall from ``{"name", "arguments"}`` (or ``function``/``parameters`` spellings)."""
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name", obj.get("tool"))
    if not isinstance(name, str) or (tool_names and name not in tool_names):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(id=f"call_{index}", name=name, arguments=args)


def tool_names_of(tools: list[dict[str, Any]] | None) -> set[str]:
    """Names of OpenAI function tools."""
    names = set()
    for t in tools or []:
        fn = t.get("function", t)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def parse_text_tool_calls(text: str | None, tools: list[dict[str, Any]] | None) -> tuple[str | None, list[ToolCall]]:
    """Split ``text`` into (remaining text, tool calls) for hermes tags or a bare JSON call.

    Only calls naming one of ``tools`` are accepted (any name when ``tools`` lists none).
    Returns the text unchanged and no calls when nothing parses.
    """
    if not text:
        return text, []
    names = tool_names_of(tools)
    calls: list[ToolCall] = []
    if "<tool_call>" in text:
        for block in _HERMES.findall(text):
            for obj in _json_objects(block):
                call = _as_call(obj, names, len(calls))
                if call is not None:
                    calls.append(call)
        if calls:
            rest = text[: text.find("<tool_call>")].strip()
            return (rest or None), calls
        return text, []
    stripped = text.strip()
    candidates: list[dict[str, Any]] = []
    if stripped.startswith(("{", "```")):
        try:
            candidates.append(parse_json_output(stripped))
        except ParseError:
            return text, []
    for obj in candidates:
        listed = obj.get("tool_calls")
        items: list[Any] = listed if isinstance(listed, list) else [obj]
        for item in items:
            call = _as_call(item, names, len(calls)) if isinstance(item, dict) else None
            if call is not None:
                calls.append(call)
    return (None, calls) if calls else (text, [])


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


__all__ = ["parse_json_output", "parse_text_tool_calls", "message_from_openai", "tool_names_of", "schema_of"]
