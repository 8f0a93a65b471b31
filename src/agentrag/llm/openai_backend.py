"""OpenAI-compatible backend (vLLM, llama.cpp server, SGLang, OpenAI ...) on the official client.

Retries are ours (tenacity: exponential backoff with jitter on 429, 5xx, timeouts, connection
errors and 200 bodies that are not valid completions); the client's own retries are disabled so
attempts are counted. A 429/503 with a ``Retry-After`` header (seconds or an HTTP date) waits at
least that long, capped by ``retry_after_max``, and holds every request to the endpoint until then. 401/403/404 and an unknown model raise :class:`EndpointError` at once, a
request over the context window :class:`ContextLimitError`, any other 4xx a non-retryable
:class:`LLMError` (see :mod:`agentrag.llm.openai_wire` and docs/llm.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from agentrag.errors import ContextLimitError, LLMError, ParseError
from agentrag.llm.adaptive import AdaptiveLimit
from agentrag.llm.base import Completion
from agentrag.llm.config import LLMConfig, UsageMeter
from agentrag.llm.openai_wire import (
    RETRYABLE_STATUS,
    ChatCompletionBody,
    parse_completion_body,
    retry_after_seconds,
    status_error,
)
from agentrag.llm.parsing import parse_text_tool_calls
from agentrag.protocol import neutralize_messages
from agentrag.records import Message, ToolCall, Usage

log = logging.getLogger(__name__)

def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (LLMError, ParseError)) and exc.is_retryable


class OpenAIBackend:
    """An LLM behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``base_url``/``api_key`` default to ``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``. Every attempt
    has ``timeout`` seconds; after ``1 + max_retries`` failed attempts an :class:`LLMError`
    names the endpoint, the model and the last status. ``attempts`` counts HTTP attempts;
    ``meter`` holds token and latency totals. ``limit`` (an :class:`AdaptiveLimit`) bounds the
    attempts in flight: ``concurrency`` of the config, lowered on 429/503 and timeouts and raised
    again when they stop (AIMD, :mod:`agentrag.llm.adaptive`); a synthesizer or eval run sets it to
    its items in flight (:meth:`set_request_limit`) unless the config sets ``concurrency``.
    """

    #: statuses that mean "too many requests" to the adaptive limit (with timeouts)
    OVERLOAD_STATUS = frozenset({429, 503})

    backend = "openai"
    #: a run puts this backend behind its response cache when a Python caller passes it as an object
    response_cache = True

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 config: LLMConfig | None = None, **settings: Any) -> None:
        cfg = config or LLMConfig(backend="openai", model=model, **settings)
        self.config = cfg.model_copy(update={"model": model, "backend": "openai"})
        self.model = model
        self.base_url = (base_url or cfg.base_url or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1")
        self._api_key = api_key or cfg.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.attempts = 0
        self.meter = UsageMeter()
        self.limit = AdaptiveLimit(cfg.concurrency, name=self.base_url, adaptive=cfg.adaptive)
        self._lock = threading.Lock()
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(base_url=self.base_url, api_key=self._api_key,
                                             max_retries=0, timeout=self.config.timeout)
            return self._client

    def set_request_limit(self, n: int) -> None:
        """Requests in flight at most (the run's items in flight); adapts below it (AIMD)."""
        self.limit.resize(n)

    def _request(self, messages: list[Message], tools: list[dict[str, Any]] | None,
                 response_format: dict[str, Any] | None, n: int, sampling: dict[str, Any]) -> dict[str, Any]:
        # control tokens in any content are neutralised: the server's template cannot be forged
        body: dict[str, Any] = {"model": self.model, "messages": [m.to_openai() for m in neutralize_messages(messages)]}
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        if n != 1:
            body["n"] = n
        merged = {**self.config.sampling_defaults(), **{k: v for k, v in sampling.items() if v is not None}}
        body.update(merged)
        return body

    def _attempt(self, body: dict[str, Any]) -> ChatCompletionBody:
        """One HTTP attempt; errors are translated into the failure policy's classes (module doc)."""
        import httpx
        import openai

        client = self.client
        with self._lock:
            self.attempts += 1
        with self.limit.slot() as slot:
            try:
                # a plain POST of the body we built: the SDK's typed ``create`` walks every message and
                # tool schema through its TypedDict transform, ~40% of the client's CPU per call
                raw = client.post("/chat/completions", body=body, cast_to=httpx.Response,
                                  options={"timeout": self.config.timeout})
            except openai.APITimeoutError as exc:
                slot.overload()
                raise LLMError(f"timed out after {self.config.timeout}s", is_retryable=True) from exc
            except openai.APIConnectionError as exc:
                raise LLMError(f"connection error: {exc}", is_retryable=True) from exc
            except openai.APIStatusError as exc:
                err = status_error(exc.status_code, str(exc)[:300], base_url=self.base_url, model=self.model)
                if exc.status_code in self.OVERLOAD_STATUS:
                    slot.overload()
                    wait = self._retry_after(exc)
                    if wait is not None and isinstance(err, LLMError):
                        err.retry_after = wait
                        self.limit.hold(wait)
                raise err from exc
            text = raw.text
        return parse_completion_body(text)

    def _retry_after(self, exc: Any) -> float | None:
        """The capped wait of a 429/503's ``Retry-After`` header (None when it has none)."""
        headers = getattr(getattr(exc, "response", None), "headers", None)
        wait = retry_after_seconds(headers.get("retry-after") if headers is not None else None)
        if wait is None:
            return None
        if wait > self.config.retry_after_max:
            log.warning("%s asks to retry after %.0f s; waiting retry_after_max=%.0f s instead", self.base_url, wait,
                        self.config.retry_after_max)
            wait = self.config.retry_after_max
        return wait

    def _completions(self, data: ChatCompletionBody, tools: list[dict[str, Any]] | None,
                     latency: float) -> list[Completion]:
        usage = data.usage
        prompt_tokens = usage.prompt_tokens if usage else 0
        completion_tokens = usage.completion_tokens if usage else 0
        out = []
        for i, ch in enumerate(data.choices):
            text = ch.message.text()
            calls = [ToolCall(id=tc.id or f"call_{j}", name=tc.function.name, arguments=tc.function.parsed_arguments())
                     for j, tc in enumerate(ch.message.tool_calls or [])]
            if not calls and tools:
                text, calls = parse_text_tool_calls(text, tools)
            finish = ch.finish_reason or "stop"
            if calls and finish == "stop":
                finish = "tool_calls"
            share = Usage(prompt_tokens=prompt_tokens if i == 0 else 0,
                          completion_tokens=completion_tokens // len(data.choices), calls=1)
            out.append(Completion(text=text, tool_calls=calls, finish_reason=finish, usage=share,
                                  latency=latency, raw=ch.model_dump(mode="json", exclude_unset=True)))
        return out

    def _call_with_retries(self, body: dict[str, Any]) -> ChatCompletionBody:
        last: dict[str, BaseException | None] = {}

        def remember(state: RetryCallState) -> None:
            if state.outcome is not None and state.outcome.failed:
                last["exc"] = state.outcome.exception()
                log.warning("LLM attempt %d to %s failed: %s", state.attempt_number, self.base_url, last["exc"])

        backoff = wait_exponential_jitter(initial=self.config.backoff_initial, max=self.config.backoff_max,
                                          jitter=self.config.backoff_initial)

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            return max(backoff(state), float(getattr(exc, "retry_after", 0.0) or 0.0))

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=wait,
            retry=retry_if_exception(_retryable), after=remember, reraise=True)
        try:
            return retrying(self._attempt, body)
        except ContextLimitError:
            raise  # data (a flagged record), never wrapped as an outage
        except (LLMError, ParseError) as exc:
            tries = f"{self.config.max_retries + 1} attempt(s)" if exc.is_retryable else "a non-retryable error"
            raise LLMError(f"LLM call to {self.base_url} (model {self.model!r}) failed after {tries}; "
                           f"last status: {exc}", is_retryable=exc.is_retryable) from exc

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        """``n`` completions for ``messages`` (extra requests if the server returns fewer)."""
        out: list[Completion] = []
        while len(out) < n:
            want = n - len(out)
            extra = dict(sampling)
            if out and extra.get("seed") is not None:
                extra["seed"] = int(extra["seed"]) + len(out)
            body = self._request(messages, tools, response_format, want, extra)
            start = time.perf_counter()
            data = self._call_with_retries(body)
            latency = time.perf_counter() - start
            got = self._completions(data, tools, latency)[:want]
            self.meter.record(got, latency)
            out.extend(got)
        return out

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        """Async twin of :meth:`chat` (runs in a worker thread; shares the request limit)."""
        return await asyncio.to_thread(self.chat, messages, tools, response_format, n, **sampling)


__all__ = ["OpenAIBackend", "RETRYABLE_STATUS"]
