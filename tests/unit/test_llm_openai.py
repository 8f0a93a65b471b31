"""OpenAIBackend against a local stub server: retries, timeouts, malformed bodies, text tool calls."""

from __future__ import annotations

import time

import pytest

from agentrag.errors import LLMError
from agentrag.llm import OpenAIBackend, resolve_llm
from agentrag.records import Message
from agentrag.testing import StubOpenAIServer

pytestmark = pytest.mark.timeout(60)  # no call may hang

MSGS = [Message(role="user", content="hi")]
TOOLS = [{"type": "function", "function": {"name": "search", "description": "search the KB",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]


def backend(url: str, **kw) -> OpenAIBackend:
    settings = {"timeout": 0.5, "max_retries": 3, "backoff_initial": 0.01, "backoff_max": 0.05, **kw}
    return OpenAIBackend("stub-model", base_url=url, api_key="k", **settings)


@pytest.mark.parametrize("fault", ["500", "429", "stall", "malformed"])
def test_retries_then_succeeds(fault: str) -> None:
    with StubOpenAIServer([fault, fault], reply="hello", stall_s=2.0) as srv:
        llm = backend(srv.base_url)
        start = time.perf_counter()
        out = llm.chat(MSGS)
        assert out[0].text == "hello"
        assert llm.attempts == 3
        assert srv.requests == 3
        assert time.perf_counter() - start < 5
    assert llm.meter.snapshot()["completion_tokens"] == 3


def test_budget_spent_raises_llmerror_naming_endpoint_model_status() -> None:
    with StubOpenAIServer(["500"] * 10) as srv:
        llm = backend(srv.base_url, max_retries=2)
        with pytest.raises(LLMError) as info:
            llm.chat(MSGS)
        msg = str(info.value)
        assert srv.base_url in msg and "stub-model" in msg and "500" in msg
        assert llm.attempts == 3 and srv.requests == 3
        assert info.value.is_retryable  # still an outage after the budget: callers leave the item unfinished


def test_stall_budget_spent_does_not_hang() -> None:
    with StubOpenAIServer(["stall"] * 5, stall_s=3.0) as srv:
        llm = backend(srv.base_url, timeout=0.3, max_retries=1)
        start = time.perf_counter()
        with pytest.raises(LLMError, match="timed out"):
            llm.chat(MSGS)
        assert time.perf_counter() - start < 2.5
        assert llm.attempts == 2


def test_non_retryable_status_fails_at_once() -> None:
    with StubOpenAIServer(["400"]) as srv:
        llm = backend(srv.base_url)
        with pytest.raises(LLMError, match="400"):
            llm.chat(MSGS)
        assert llm.attempts == 1


def test_native_tool_calls_and_request_body() -> None:
    reply = {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "search", "arguments": '{"query": "eiffel"}'}}]}
    with StubOpenAIServer(reply=reply) as srv:
        llm = backend(srv.base_url, temperature=0.3)
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
        out = llm.chat(MSGS, tools=TOOLS, response_format=fmt, max_tokens=7)
        assert out[0].tool_calls[0].name == "search"
        assert out[0].tool_calls[0].arguments == {"query": "eiffel"}
        body = srv.bodies[0]
        assert body["tools"] == TOOLS and body["response_format"] == fmt
        assert body["temperature"] == 0.3 and body["max_tokens"] == 7 and body["model"] == "stub-model"


@pytest.mark.parametrize("content", [
    'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"query": "eiffel"}}\n</tool_call>',
    '{"name": "search", "arguments": {"query": "eiffel"}}',
])
def test_text_tool_calls_are_parsed(content: str) -> None:
    with StubOpenAIServer(reply=content) as srv:
        out = backend(srv.base_url).chat(MSGS, tools=TOOLS)
        assert [tc.name for tc in out[0].tool_calls] == ["search"]
        assert out[0].tool_calls[0].arguments == {"query": "eiffel"}
        assert out[0].finish_reason == "tool_calls"


def test_text_json_without_tools_is_left_alone() -> None:
    with StubOpenAIServer(reply='{"name": "x", "arguments": {}}') as srv:
        out = backend(srv.base_url).chat(MSGS)
        assert out[0].tool_calls == [] and out[0].text.startswith("{")


def test_n_samples_and_concurrency_limit() -> None:
    with StubOpenAIServer(reply="a", latency=0.2) as srv:
        llm = backend(srv.base_url, concurrency=1)
        assert len(llm.chat(MSGS, n=3)) == 3
        import threading
        start = time.perf_counter()
        threads = [threading.Thread(target=llm.chat, args=(MSGS,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert time.perf_counter() - start >= 0.55  # serialized by the semaphore


def test_achat() -> None:
    import asyncio
    with StubOpenAIServer(reply="async") as srv:
        out = asyncio.run(backend(srv.base_url).achat(MSGS))
        assert out[0].text == "async"


def test_resolve_openai_ref_and_env(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    llm = resolve_llm("openai:m1", timeout=3)
    assert isinstance(llm, OpenAIBackend) and llm.base_url == "http://127.0.0.1:1/v1" and llm.config.timeout == 3
    llm2 = resolve_llm("openai:org/m@x@http://h:8/v1")
    assert llm2.model == "org/m@x" and llm2.base_url == "http://h:8/v1"
