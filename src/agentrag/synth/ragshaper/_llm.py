"""Calling an LLM for schema-constrained JSON, with provenance (private helper of the stages)."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from agentrag.errors import LLMError, ParseError
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Usage

log = logging.getLogger(__name__)


def prompt_hash(messages: list[Message], extra: Any = None) -> str:
    """A short stable hash of a request (messages + schema), for provenance."""
    blob = json.dumps([[m.role, m.content] for m in messages] + [extra], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_json(text: str) -> dict[str, Any]:
    """Tolerant JSON-object extraction (the LLM area's parser)."""
    from agentrag.llm.parsing import parse_json_output

    return parse_json_output(text)


def call_json(llm: LLM, messages: list[Message], schema: dict[str, Any], *, name: str, stage: str,
              **sampling: Any) -> tuple[dict[str, Any] | None, Provenance, str | None]:
    """Ask ``llm`` for a JSON object under ``schema``. Returns (object or None, provenance, error).

    Never raises for model failures: an LLM error or unparsable output comes back as the error
    string, with the raw output kept in the provenance.
    """
    fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    prov = Provenance(stage=stage, model=getattr(llm, "model", ""), prompt_hash=prompt_hash(messages, schema))
    try:
        completion = llm.chat(messages, response_format=fmt, **sampling)[0]
    except LLMError as exc:
        log.warning("%s: LLM call failed: %s", stage, exc)
        return None, prov, f"llm_error: {exc}"
    prov.usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    if completion.tool_calls and not completion.text:
        prov.raw_output = json.dumps([tc.arguments for tc in completion.tool_calls])
        return dict(completion.tool_calls[0].arguments), prov, None
    prov.raw_output = completion.text or ""
    if completion.finish_reason == "length":
        try:
            obj = json.loads(prov.raw_output)
        except json.JSONDecodeError:
            return None, prov, (f"parse_error: output cut off at max_tokens={sampling.get('max_tokens')} "
                                "before the JSON object closed")
        if isinstance(obj, dict):
            return obj, prov, None
    try:
        return parse_json(prov.raw_output), prov, None
    except ParseError as exc:
        return None, prov, f"parse_error: {exc}"
