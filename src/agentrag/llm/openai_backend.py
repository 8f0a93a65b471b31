"""OpenAI-compatible backend (vLLM, llama.cpp server, SGLang, OpenAI ...) on the official client.

Retries are ours (tenacity: exponential backoff with jitter on 429, 5xx, timeouts, connection
errors and malformed bodies); the client's own retries are disabled so attempts are counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from agentrag.errors import LLMError, ParseError
from agentrag.llm.base import Completion
from agentrag.llm.config import LLMConfig, UsageMeter
from agentrag.llm.parsing import message_from_openai, parse_text_tool_calls
from agentrag.records import Message, Usage

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (LLMError, ParseError)) and exc.is_retryable


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a chat-completion body (a 200 reply can still be garbage,
    e.g. ``"choices": [null]``); ``None`` when every choice has a readable message."""
    for i, ch in enumerate(data["choices"]):
        if not isinstance(ch, dict):
            return f"choices[{i}] is {type(ch).__name__}, not an object"
        msg = ch.get("message")
        if msg is None:
            continue
        if not isinstance(msg, dict):
            return f"choices[{i}].message is {type(msg).__name__}, not an object"
        if msg.get("content") is not None and not isinstance(msg["content"], (str, list)):
            return f"choices[{i}].message.content is {type(msg['content']).__name__}"
        calls = msg.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(
                isinstance(tc, dict) and isinstance(tc.get("function", {}), dict) for tc in calls)):
            return f"choices[{i}].message.tool_calls is not a list of tool-call objects"
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return f"usage is {type(usage).__name__}, not an object"
    return None


class OpenAIBackend:
    """An LLM behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``base_url``/``api_key`` default to ``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``. Every attempt
    has ``timeout`` seconds; after ``1 + max_retries`` failed attempts an :class:`LLMError`
    names the endpoint, the model and the last status. ``attempts`` counts HTTP attempts;
    ``meter`` holds token and latency totals.
    """

    backend = "openai"

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
        self._sem = threading.BoundedSemaphore(cfg.concurrency)
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

    def _request(self, messages: list[Message], tools: list[dict[str, Any]] | None,
                 response_format: dict[str, Any] | None, n: int, sampling: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [m.to_openai() for m in messages]}
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        if n != 1:
            body["n"] = n
        merged = {**self.config.sampling_defaults(), **{k: v for k, v in sampling.items() if v is not None}}
        body.update(merged)
        return body

    def _attempt(self, body: dict[str, Any]) -> dict[str, Any]:
        """One HTTP attempt; errors are translated into LLMError/ParseError with is_retryable."""
        import httpx
        import openai

        with self._lock:
            self.attempts += 1
        try:
            # a plain POST of the body we built: the SDK's typed ``create`` walks every message and
            # tool schema through its TypedDict transform, ~40% of the client's CPU per call
            raw = self.client.post("/chat/completions", body=body, cast_to=httpx.Response,
                                   options={"timeout": self.config.timeout})
        except openai.APITimeoutError as exc:
            raise LLMError(f"timed out after {self.config.timeout}s", is_retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"connection error: {exc}", is_retryable=True) from exc
        except openai.APIStatusError as exc:
            retry = exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
            detail = str(exc)[:300]
            raise LLMError(f"HTTP {exc.status_code}: {detail}", is_retryable=retry) from exc
        text = raw.text
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseError(f"malformed JSON response body: {text[:200]!r}", is_retryable=True) from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ParseError(f"response has no choices: {text[:200]!r}", is_retryable=True)
        problem = _shape_problem(data)
        if problem:
            raise ParseError(f"response has the wrong shape ({problem}): {text[:200]!r}", is_retryable=True)
        return data

    def _completions(self, data: dict[str, Any], tools: list[dict[str, Any]] | None,
                     latency: float) -> list[Completion]:
        usage = data.get("usage") or {}
        choices = data["choices"]
        out = []
        for i, ch in enumerate(choices):
            msg = message_from_openai(ch.get("message") or {})
            text, calls = msg.content, list(msg.tool_calls)
            if not calls and tools:
                text, calls = parse_text_tool_calls(text, tools)
            finish = ch.get("finish_reason") or "stop"
            if calls and finish == "stop":
                finish = "tool_calls"
            share = Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0) if i == 0 else 0,
                          completion_tokens=int(usage.get("completion_tokens") or 0) // len(choices), calls=1)
            out.append(Completion(text=text, tool_calls=calls, finish_reason=finish, usage=share,
                                  latency=latency, raw=ch))
        return out

    def _call_with_retries(self, body: dict[str, Any]) -> dict[str, Any]:
        last: dict[str, BaseException | None] = {}

        def remember(state: RetryCallState) -> None:
            if state.outcome is not None and state.outcome.failed:
                last["exc"] = state.outcome.exception()
                log.warning("LLM attempt %d to %s failed: %s", state.attempt_number, self.base_url, last["exc"])

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=wait_exponential_jitter(initial=self.config.backoff_initial, max=self.config.backoff_max,
                                         jitter=self.config.backoff_initial),
            retry=retry_if_exception(_retryable), after=remember, reraise=True)
        try:
            return retrying(self._attempt, body)
        except (LLMError, ParseError) as exc:
            tries = f"{self.config.max_retries + 1} attempt(s)" if exc.is_retryable else "a non-retryable error"
            raise LLMError(f"LLM call to {self.base_url} (model {self.model!r}) failed after {tries}; "
                           f"last status: {exc}", is_retryable=exc.is_retryable) from exc

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        """``n`` completions for ``messages`` (extra requests if the server returns fewer)."""
        out: list[Completion] = []
        with self._sem:
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
        """Async twin of :meth:`chat` (runs in a worker thread; shares the concurrency limit)."""
        return await asyncio.to_thread(self.chat, messages, tools, response_format, n, **sampling)


__all__ = ["OpenAIBackend", "RETRYABLE_STATUS"]
