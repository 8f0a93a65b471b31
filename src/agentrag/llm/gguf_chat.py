"""The embedded backend's prompt and grammar for a GGUF written by ``agentrag train --gguf``.

Such a file carries the checkpoint's chat template (TRL's ChatML training template) and the key
``agentrag.prompt_format = chat_template_tools``. The backend then renders the messages exactly as
the ``hf:`` backend does (the SFT export's form, the tool schemas in ``tools``) with that template,
under the same Jinja settings as transformers' ``apply_chat_template`` (sandboxed, ``trim_blocks``,
``lstrip_blocks``, a ``tojson`` that does not escape HTML), so the prompt's tokens are the ones the
model was trained on (``tests/unit/test_llm_gguf.py`` checks the two renderings are equal).

Decoding is constrained by a llama.cpp grammar instead of trusting the model: with tools, the
reply is free text without ``<tool_call>``, optionally ending in exactly one
``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` whose JSON follows one tool's
schema; with a JSON response format, the reply is that schema's JSON. llama-cpp-python applies a
grammar to every vocabulary entry at every token (about 3x slower here), so a tool turn is first
decoded freely and kept when :func:`well_formed_reply` accepts it (for greedy decoding the grammar
would have chosen the same tokens: each was allowed); otherwise it is decoded again under the
grammar. This is llama.cpp's own shortcut (sample, then check the grammar), per reply instead of
per token.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

PROMPT_FORMAT_KEY = "agentrag.prompt_format"
PROMPT_FORMAT = "chat_template_tools"
OPEN, CLOSE = "<tool_call>", "</tool_call>"


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def render_prompt(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  **special_tokens: str) -> str:
    """The prompt text of ``messages`` (SFT export form) under ``template``, generation prompt added."""
    return str(_compiled(template).render(messages=messages, tools=tools or None, documents=None,
                                          add_generation_prompt=True, **special_tokens))


def _text_without(marker: str) -> str:
    """A GBNF expression for any text that never contains ``marker`` (``marker`` starts with '<')."""
    alts = ['[^<]']
    for i in range(1, len(marker)):
        prefix = json.dumps(marker[:i])
        alts.append(f"{prefix} [^{marker[i]}<]")
    return "( " + " | ".join(alts) + " )*"


_CALL_AT_END = re.compile(r"<tool_call>\n(\{.*\})\s*\n</tool_call>\s*\Z", re.S)
_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                            "boolean": (bool,), "object": (dict,), "array": (list,)}


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    """``value`` against the parts of a tool's JSON schema the grammar enforces (types, required,
    no unknown keys, const/enum, string length, integer bounds)."""
    if "const" in schema and value != schema["const"]:
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        if not isinstance(value, _JSON_TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool)):
            return False
    if isinstance(value, str):
        if len(value) < int(schema.get("minLength", 0)) or len(value) > int(schema.get("maxLength", len(value))):
            return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            return False
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        if any(k not in value for k in schema.get("required", [])) or any(k not in props for k in value):
            return False
        return all(_fits(v, props[k]) for k, v in value.items())
    return True


def well_formed_reply(text: str, tools: list[dict[str, Any]]) -> bool:
    """Whether ``text`` is in the language of :func:`tool_call_grammar`: no ``<tool_call>``, or exactly
    one at the end whose JSON is ``{"name": <a tool>, "arguments": <valid for it>}``."""
    if "<" + "<" in text:
        return False
    n = text.count(OPEN)
    if n == 0:
        return CLOSE not in text
    m = _CALL_AT_END.search(text)
    if n != 1 or m is None or text.count(CLOSE) != 1:
        return False
    try:
        call = json.loads(m.group(1))
    except ValueError:
        return False
    if not isinstance(call, dict) or list(call) != ["name", "arguments"]:
        return False
    for t in tools:
        fn = t.get("function", t)
        if call["name"] == fn["name"]:
            return _fits(call["arguments"], fn.get("parameters") or {"type": "object", "properties": {}})
    return False


def tool_call_grammar(tools: list[dict[str, Any]]) -> str:
    """GBNF: free text without ``<tool_call>``, then at most one well-formed call of one tool."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    branches = []
    for t in tools:
        fn = t.get("function", t)
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        branches.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                         "required": ["name", "arguments"], "additionalProperties": False})
    call = json_schema_to_gbnf(json.dumps({"oneOf": branches}), prop_order=["name", "arguments"])
    call = re.sub(r"^root ::=", "call ::=", call, count=1, flags=re.M)
    head = (f'root ::= text ( {json.dumps(OPEN + chr(10))} call {json.dumps(chr(10) + CLOSE)} )?\n'
            f"text ::= {_text_without(OPEN)}\n")
    return head + call


__all__ = ["render_prompt", "tool_call_grammar", "well_formed_reply", "PROMPT_FORMAT_KEY", "PROMPT_FORMAT"]
