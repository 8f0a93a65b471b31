"""What an OpenAI-compatible server may answer, and what each answer becomes (docs/llm.md).

A 200 body is validated against :class:`ChatCompletionBody` (strict: no coercion of ``"5"`` to
5, no integer tool-call ids, no unknown roles, no choice without a message, no empty message, no
text-less and call-less message unless the model ran out of tokens). A body that fails is a
retryable :class:`~agentrag.errors.ParseError` (the server is misbehaving: an outage, not data).
:func:`status_error` maps an error status to the failure policy's classes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentrag.errors import ContextLimitError, EndpointError, LLMError, ParseError

#: statuses worth retrying (with 5xx): timeouts, conflicts, rate limits
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: a 400 whose message says so: the request does not fit the context window (OpenAI, vLLM,
#: llama.cpp server, SGLang)
CONTEXT_PATTERN = re.compile(r"maximum context length|context length|context size|context window|"
                             r"context_length_exceeded|exceeds? the available context", re.IGNORECASE)
#: a message saying the model does not exist (vLLM/OpenAI 404, some servers answer 400)
UNKNOWN_MODEL_PATTERN = re.compile(r"model\b.{0,200}\b(does not exist|not found|not exist)|model_not_found|"
                                   r"unknown model|no such model", re.IGNORECASE | re.DOTALL)


class _Wire(BaseModel):
    """Strict (no type coercion); extra keys servers add (logprobs, reasoning_content...) are kept."""

    model_config = ConfigDict(strict=True, extra="allow")


class FunctionCall(_Wire):
    name: str = Field(min_length=1)
    arguments: str | dict[str, Any] = "{}"

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(value, str) and value.strip():
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"arguments are not JSON: {value[:100]!r}") from exc
            if not isinstance(parsed, dict):
                raise ValueError(f"arguments are not a JSON object: {value[:100]!r}")
        return value

    def parsed_arguments(self) -> dict[str, Any]:
        if isinstance(self.arguments, dict):
            return self.arguments
        return json.loads(self.arguments) if self.arguments.strip() else {}


class ToolCallBody(_Wire):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class MessageBody(_Wire):
    role: Literal["assistant"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCallBody] | None = None

    def text(self) -> str | None:
        if isinstance(self.content, list):  # content parts
            return "".join(str(p.get("text", "")) for p in self.content)
        return self.content


class ChoiceBody(_Wire):
    index: int = 0
    message: MessageBody
    finish_reason: str | None = None

    @model_validator(mode="after")
    def _says_something(self) -> ChoiceBody:
        # a model that ran out of tokens may have produced nothing: a valid (truncated) completion
        if self.message.content is None and not self.message.tool_calls and self.finish_reason != "length":
            raise ValueError("message has neither content nor tool calls")
        return self


class UsageBody(_Wire):
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    total_tokens: int | None = Field(None, ge=0)


class ChatCompletionBody(_Wire):
    choices: list[ChoiceBody] = Field(min_length=1)
    usage: UsageBody | None = None


def parse_completion_body(text: str) -> ChatCompletionBody:
    """The validated body of a 200 reply; a retryable :class:`ParseError` naming the bad field."""
    try:
        return ChatCompletionBody.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "(body)"
        raise ParseError(f"the 200 reply is not a valid chat completion: {where}: {err.get('msg')} "
                         f"({exc.error_count()} error(s)); body: {text[:200]!r}", is_retryable=True) from exc


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds: its delay-seconds form (``"30"``)
    or its HTTP-date form (``"Wed, 21 Oct 2026 07:28:00 GMT"``, counted from ``now``, default the
    clock); None when absent or unreadable. A date in the past is 0."""
    if value is None:
        return None
    text = value.strip()
    try:
        secs = float(text)
    except ValueError:
        import time
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        secs = when.timestamp() - (time.time() if now is None else now)
    if secs != secs or secs == float("inf"):  # NaN / inf: unreadable
        return None
    return max(0.0, secs)


def status_error(status: int, detail: str, *, base_url: str, model: str) -> LLMError | EndpointError:
    """What an HTTP error status from ``base_url`` becomes under the failure policy."""
    where = f"LLM endpoint {base_url} (model {model!r})"
    if status in (401, 403):
        return EndpointError(f"{where} refused the request with HTTP {status} ({detail}); check OPENAI_API_KEY "
                             "/ the api_key in your YAML", endpoint=base_url, status=status)
    if status in (400, 413) and CONTEXT_PATTERN.search(detail):
        return ContextLimitError(f"{where}: the request is over the model's context window: {detail}")
    if status == 404 or (400 <= status < 500 and UNKNOWN_MODEL_PATTERN.search(detail)):
        return EndpointError(f"{where} answered HTTP {status} ({detail}); check the model name (GET "
                             f"{base_url.rstrip('/')}/models lists them) and the URL path (it usually ends "
                             "in /v1)", endpoint=base_url, status=status)
    retry = status in RETRYABLE_STATUS or status >= 500
    return LLMError(f"HTTP {status}: {detail}", is_retryable=retry)


__all__ = ["ChatCompletionBody", "ChoiceBody", "MessageBody", "ToolCallBody", "FunctionCall", "UsageBody",
           "parse_completion_body", "status_error", "retry_after_seconds", "RETRYABLE_STATUS", "CONTEXT_PATTERN",
           "UNKNOWN_MODEL_PATTERN"]
