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
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def split_think(text: str | None) -> tuple[str | None, str | None]:
    """``(text without its reasoning, the reasoning)`` of a reasoning model's reply.

    Removes every ``<think>...</think>`` block; a ``</think>`` with no opening tag (chat templates
    that put ``<think>`` in the generation prompt, e.g. Qwen3, DeepSeek-R1) makes everything before
    it reasoning; an opening ``<think>`` never closed (the budget ran out while thinking) makes the
    rest reasoning. The reasoning is the blocks' texts joined by blank lines, ``None`` when there
    is none. Every answer, tool-call and JSON parse runs on the first element.
    """
    if not text or "think>" not in text:
        return text, None
    parts: list[str] = []
    head, sep, tail = text.partition("</think>")
    if sep and "<think>" not in head:
        parts.append(head)
        text = tail
    parts += _THINK.findall(text)
    rest = _THINK.sub("", text)
    if "<think>" in rest:
        rest, _, unclosed = rest.partition("<think>")
        parts.append(unclosed)
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return rest.strip(), (reasoning or None)


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
    Returns the text unchanged and no calls when nothing parses. A reasoning model's
    ``<think>`` block is not parsed for calls; it stays, tagged, at the front of the remaining text
    (the agent moves it to the step's ``reasoning``).
    """
    if not text:
        return text, []
    body, reasoning = split_think(text)
    if reasoning is not None:
        rest, found = parse_text_tool_calls(body, tools)
        if not found:
            return text, []
        return f"<think>{reasoning}</think>" + (f"\n{rest}" if rest else ""), found
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


__all__ = ["split_think", "strip_think", "reasoning_of", "parse_json_output", "parse_text_tool_calls", "message_from_openai", "tool_names_of", "schema_of"]
