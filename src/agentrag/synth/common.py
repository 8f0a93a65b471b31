"""What the synthesizers share: JSON and text calls with provenance, the progress-callback type,
rejection-reason counts and usage sums for the funnels, derived sampling seeds.

``call_json`` asks an LLM for a JSON object under a schema and never raises for a model failure:
an unparsable output or a failed call comes back as an error string with the raw output in the
provenance, so the stage writes a flagged record. With ``raise_retryable=True`` an outage
(``LLMError`` with ``is_retryable``, after the backend's retries) propagates instead, so the item
stays unfinished and is redone on rerun rather than recorded as a rejection.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from agentrag.errors import LLMError, ParseError
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Usage

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


def prompt_hash(messages: list[Message], extra: Any = None) -> str:
    """A short stable hash of a request (messages + schema), for provenance."""
    blob = json.dumps([[m.role, m.content] for m in messages] + [extra], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def derive_seed(*parts: object) -> int:
    """A sampling seed in [0, 2^31) derived from ``parts`` (run seed, item id, node id, purpose ...).

    Seeds derived this way make a resumed run draw exactly the samples of an uninterrupted one
    (and hit the LLM cache for those already paid), whatever order items and workers ran in."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


def parse_json(text: str) -> dict[str, Any]:
    """Tolerant JSON-object extraction (the LLM area's parser)."""
    from agentrag.llm.parsing import parse_json_output

    return parse_json_output(text)


def call_json(llm: LLM, messages: list[Message], schema: dict[str, Any], *, name: str, stage: str,
              raise_retryable: bool = False, **sampling: Any) -> tuple[dict[str, Any] | None, Provenance, str | None]:
    """Ask ``llm`` for a JSON object under ``schema``. Returns (object or None, provenance, error).

    Never raises for model failures (see the module docstring for ``raise_retryable``).
    """
    fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    prov = Provenance(stage=stage, model=getattr(llm, "model", ""), prompt_hash=prompt_hash(messages, schema))
    try:
        completion = llm.chat(messages, response_format=fmt, **sampling)[0]
    except LLMError as exc:
        if raise_retryable and exc.is_retryable:
            raise
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


def call_text(llm: LLM, messages: list[Message], *, stage: str,
              **sampling: Any) -> tuple[str | None, Provenance, str | None]:
    """One chat call for free text. Returns ``(text or None, provenance, error)``.

    A non-retryable LLM error comes back as the error string (the caller writes a flagged
    record); a retryable one (an outage that outlived the backend's retries) is re-raised, so
    the item stays unfinished and is redone on rerun. Output cut off at ``max_tokens`` comes
    back with its text and a ``truncated`` error.
    """
    prov = Provenance(stage=stage, model=str(getattr(llm, "model", "")), prompt_hash=prompt_hash(messages))
    try:
        completion = llm.chat(messages, **sampling)[0]
    except LLMError as exc:
        if exc.is_retryable:
            raise
        log.warning("%s: LLM call failed: %s", stage, exc)
        return None, prov, f"llm_error: {exc}"
    prov.usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    prov.raw_output = completion.text or ""
    if completion.finish_reason == "length":
        return prov.raw_output, prov, f"truncated: output cut off at max_tokens={sampling.get('max_tokens')}"
    return prov.raw_output, prov, None


def reason_counts(reasons: Iterable[str | None]) -> dict[str, int]:
    """``{reason kind: count}``; the kind is the text before the first colon."""
    return dict(Counter((r or "").split(":")[0] for r in reasons if r))


def total_usage(provenances: Iterable[Provenance | None]) -> Usage:
    """The summed token usage of some provenance records."""
    return sum((p.usage for p in provenances if p is not None), Usage())


__all__ = ["Progress", "prompt_hash", "derive_seed", "parse_json", "call_json", "call_text", "reason_counts",
           "total_usage"]
