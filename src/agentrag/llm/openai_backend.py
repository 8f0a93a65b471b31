"""OpenAI-compatible backend (vLLM, llama.cpp server, SGLang, OpenAI ...): a JSON POST to
``/chat/completions`` over a thread-safe urllib3 connection pool (keep-alive; TLS verified against
``$SSL_CERT_FILE`` or certifi's bundle; ``$HTTPS_PROXY``/``$HTTP_PROXY``/``$NO_PROXY`` honoured).
The official SDK's client cost about twice the client CPU per request (``benchmarks/llm.py
--client-only``), and at 64 requests in flight a run's client is short of CPU.

Retries are ours (tenacity: exponential backoff with jitter on 429, 5xx, timeouts, connection
errors and 200 bodies that are not valid completions); urllib3's own retries and redirects are
off, so attempts are counted. A 429/503 with a ``Retry-After`` header (seconds or an HTTP date) waits at
least that long, capped by ``retry_after_max``, and holds every request to the endpoint until then. 401/403/404 and an unknown model raise :class:`EndpointError` at once, a
request over the context window :class:`ContextLimitError`, any other 4xx a non-retryable
:class:`LLMError` (see :mod:`agentrag.llm.openai_wire` and docs/llm.md).
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

from agentrag._version import __version__
from agentrag.errors import ContextLimitError, EndpointError, LLMError, ParseError
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

def _pool_manager(base_url: str) -> Any:
    """A urllib3 pool for ``base_url``: keep-alive connections shared by every thread, as many kept
    as requests run at once; TLS verified against ``$SSL_CERT_FILE`` or certifi's bundle; the
    environment's proxy for the URL's scheme unless ``$NO_PROXY`` exempts its host."""
    import urllib.parse
    import urllib.request

    import urllib3

    kw: dict[str, Any] = {"num_pools": 4, "maxsize": 1024, "block": False}
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme == "https":
        ca = os.environ.get("SSL_CERT_FILE")
        if not ca:
            try:
                import certifi

                ca = certifi.where()
            except ImportError:  # the system's store
                ca = None
        if ca:
            kw["ca_certs"] = ca
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return urllib3.ProxyManager(proxy, **kw)
    return urllib3.PoolManager(**kw)


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
        self._url = self.base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json",
                         "Accept": "application/json", "User-Agent": f"agentrag/{__version__}"}
        from urllib3 import Timeout

        # the timeout for connecting and for each read of the reply (as the SDK's client counted it)
        self._timeout = Timeout(connect=cfg.timeout, read=cfg.timeout)
        self._pool: Any = None
        #: the first answer no retry can fix (401/403/404, an unknown model): every later attempt
        #: raises it again without a request, so the items still in flight send nothing more
        self._refused: EndpointError | None = None

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def pool(self) -> Any:
        """The urllib3 pool manager (a proxy manager when the environment names a proxy for the URL)."""
        with self._lock:
            if self._pool is None:
                self._pool = _pool_manager(self.base_url)
            return self._pool

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
        from urllib3.exceptions import HTTPError, NewConnectionError, TimeoutError

        pool = self.pool
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self._raise_refused()
        with self._lock:
            self.attempts += 1
        with self.limit.slot() as slot:
            self._raise_refused()  # refused while this attempt waited for a slot
            try:
                raw = pool.request("POST", self._url, body=data, headers=self._headers, retries=False,
                                   redirect=False, timeout=self._timeout)
            except NewConnectionError as exc:  # (urllib3 makes it a kind of connect timeout)
                raise LLMError(f"connection error: {exc}", is_retryable=True) from exc
            except TimeoutError as exc:
                slot.overload()
                raise LLMError(f"timed out after {self.config.timeout}s", is_retryable=True) from exc
            except HTTPError as exc:
                raise LLMError(f"connection error: {exc}", is_retryable=True) from exc
            text = raw.data.decode("utf-8", errors="replace")
            if raw.status >= 400 or raw.status < 200:
                err = status_error(raw.status, f"Error code: {raw.status} - {text}"[:300], base_url=self.base_url,
                                   model=self.model)
                if isinstance(err, EndpointError):
                    with self._lock:
                        self._refused = self._refused or err
                if raw.status in self.OVERLOAD_STATUS:
                    slot.overload()
                    wait = self._retry_after(raw.headers)
                    if wait is not None and isinstance(err, LLMError):
                        err.retry_after = wait
                        self.limit.hold(wait)
                raise err
        return parse_completion_body(text)

    def _raise_refused(self) -> None:
        refused = self._refused
        if refused is not None:
            raise EndpointError(str(refused), endpoint=refused.endpoint, status=refused.status)

    def _retry_after(self, headers: Any) -> float | None:
        """The capped wait of a 429/503's ``Retry-After`` header (None when it has none)."""
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
