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
schema; with a JSON response format, the reply is that schema's JSON.
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


__all__ = ["render_prompt", "tool_call_grammar", "PROMPT_FORMAT_KEY", "PROMPT_FORMAT"]
