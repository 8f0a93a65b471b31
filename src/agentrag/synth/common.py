"""What the synthesizers share: JSON and text calls with provenance,
rejection-reason counts and usage sums for the funnels, derived sampling seeds.

``call_json`` asks an LLM for a JSON object declared by a pydantic model; model output that fails
parsing or validation comes back as an error string with the raw output in the provenance, so
the stage writes a flagged record. LLM failures follow the failure policy
(:func:`agentrag.errors.classify`): an outage propagates (the item stays unfinished), a
configuration error propagates (the run stops), a request over the context window is data.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from agentrag.errors import ContextLimitError, LLMError, ParseError
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, Usage

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


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


def _failed_call(exc: LLMError, stage: str) -> str:
    """The failure policy for one synthesizer LLM call: a request over the model's context window
    is data (returned as a ``context_limit`` error for a flagged record); every other LLM error is
    re-raised (an outage leaves the item unfinished; a non-retryable one stops the run)."""
    if isinstance(exc, ContextLimitError):
        log.info("%s: request over the model's context window: %s", stage, exc)
        return f"context_limit: {exc}"
    raise exc


def call_json(llm: LLM, messages: list[Message], schema: type[M], *, name: str | None = None,
              stage: str, **sampling: Any) -> tuple[M | None, Provenance, str | None]:
    """Ask ``llm`` for a JSON object declared by the pydantic model ``schema``. Returns
    ``(instance or None, provenance, error)``.

    Model output that is not valid JSON of the model (or cut off at ``max_tokens``) comes back as a
    ``parse_error: ...`` string with the raw output in the provenance, so the stage writes a
    flagged record; a request over the context window as ``context_limit: ...``. Every other LLM
    failure propagates (the failure policy: outage -> unfinished, 401/404 -> the run stops).
    """
    from agentrag.llm.structured import response_format, validate_structured

    fmt = response_format(schema, name)
    prov = Provenance(stage=stage, model=getattr(llm, "model", ""), prompt_hash=prompt_hash(messages, fmt))
    try:
        completion = llm.chat(messages, response_format=fmt, **sampling)[0]
    except LLMError as exc:
        return None, prov, _failed_call(exc, stage)
    prov.usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    obj: Any
    if completion.tool_calls and not completion.text:
        prov.raw_output = json.dumps([tc.arguments for tc in completion.tool_calls])
        obj = dict(completion.tool_calls[0].arguments)
    else:
        prov.raw_output = completion.text or ""
        try:
            obj = parse_json(prov.raw_output)
        except ParseError as exc:
            if completion.finish_reason == "length":
                return None, prov, (f"parse_error: output cut off at max_tokens={sampling.get('max_tokens')} "
                                    "before the JSON object closed")
            return None, prov, f"parse_error: {exc}"
    try:
        return validate_structured(obj, schema), prov, None
    except ParseError as exc:
        if completion.finish_reason == "length":  # the lenient parser may find an inner object of a cut reply
            return None, prov, (f"parse_error: output cut off at max_tokens={sampling.get('max_tokens')} "
                                f"before the JSON object closed ({exc})")
        return None, prov, f"parse_error: {exc}"


def call_json_resampled(llm: LLM, messages: list[Message], schema: type[M], *, attempts: int,
                        sampling: Callable[[int], dict[str, Any]], name: str | None = None,
                        stage: str) -> tuple[M | None, list[Provenance], list[str]]:
    """:func:`call_json` asked up to ``attempts`` times, ``sampling(attempt)`` giving each call's
    parameters (the first usually greedy, the others sampled with their own seeds), until a reply
    parses. Returns ``(instance or None, every call's provenance, every failed call's error)``. A
    request over the context window ends the attempts at once (its error is the last one: the same
    request cannot fit on the next try); LLM failures propagate as in :func:`call_json`."""
    provs: list[Provenance] = []
    errors: list[str] = []
    for attempt in range(attempts):
        value, prov, error = call_json(llm, messages, schema, name=name, stage=stage, **sampling(attempt))
        provs.append(prov)
        if value is not None:
            return value, provs, errors
        errors.append(error or "parse_error: no object")
        if errors[-1].startswith("context_limit"):
            break
    return None, provs, errors


def call_text(llm: LLM, messages: list[Message], *, stage: str,
              **sampling: Any) -> tuple[str | None, Provenance, str | None]:
    """One chat call for free text. Returns ``(text or None, provenance, error)``.

    Output cut off at ``max_tokens`` comes back with its text and a ``truncated`` error; a request
    over the context window as ``context_limit``; every other LLM failure propagates (see
    :func:`call_json`).
    """
    prov = Provenance(stage=stage, model=str(getattr(llm, "model", "")), prompt_hash=prompt_hash(messages))
    try:
        completion = llm.chat(messages, **sampling)[0]
    except LLMError as exc:
        return None, prov, _failed_call(exc, stage)
    prov.usage = completion.usage if completion.usage.calls else completion.usage + Usage(calls=1)
    prov.raw_output = completion.text or ""
    if completion.finish_reason == "length":
        return prov.raw_output, prov, f"truncated: output cut off at max_tokens={sampling.get('max_tokens')}"
    return prov.raw_output, prov, None


def reason_kind(reason: str) -> str:
    """A rejection reason's kind: the text before the first colon, or ``verifier: <check>`` for a
    decision of the verifier (``"verifier: role: ..."``)."""
    parts = reason.split(":")
    return f"verifier: {parts[1].strip()}" if parts[0] == "verifier" and len(parts) > 2 else parts[0]


def reason_counts(reasons: Iterable[str | None]) -> dict[str, int]:
    """``{reason kind: count}`` (:func:`reason_kind`)."""
    return dict(Counter(reason_kind(r) for r in reasons if r))


__all__ = ["prompt_hash", "derive_seed", "parse_json", "call_json", "call_text", "reason_kind", "reason_counts"]
