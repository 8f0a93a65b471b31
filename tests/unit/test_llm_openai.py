"""OpenAIBackend against a local stub server: retries, timeouts, malformed bodies, text tool calls, and
what each failure becomes under the failure policy (outage, fatal endpoint error, model-limited)."""

from __future__ import annotations

import json
import time

import pytest

from agentrag.errors import ContextLimitError, EndpointError, LLMError, ParseError, classify
from agentrag.llm import OpenAIBackend, resolve_llm
from agentrag.llm.openai_wire import parse_completion_body, status_error
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


# --- the failure policy: what each reply becomes -------------------------------------------------

@pytest.mark.parametrize("kind", sorted(StubOpenAIServer.BAD_BODIES))
def test_bad_body_is_retried_then_an_outage(kind: str) -> None:
    with StubOpenAIServer([kind] * 5) as srv:
        llm = backend(srv.base_url, max_retries=2)
        with pytest.raises(LLMError) as info:
            llm.chat(MSGS, tools=TOOLS)
        assert srv.requests == 3 and llm.attempts == 3  # retried: the server misbehaved
        assert info.value.is_retryable and classify(info.value) == "outage"
        assert "not a valid chat completion" in str(info.value)


@pytest.mark.parametrize("kind", sorted(StubOpenAIServer.BAD_BODIES))
def test_bad_body_then_good_one_succeeds(kind: str) -> None:
    with StubOpenAIServer([kind], reply="fine") as srv:
        out = backend(srv.base_url).chat(MSGS)
        assert out[0].text == "fine" and srv.requests == 2


@pytest.mark.parametrize("fault", ["null_choice", "bad_message", "garbage"])
def test_other_wrong_shapes_are_outages(fault: str) -> None:
    with StubOpenAIServer([fault] * 3) as srv:
        with pytest.raises(LLMError) as info:
            backend(srv.base_url, max_retries=1).chat(MSGS)
        assert srv.requests == 2 and classify(info.value) == "outage"


@pytest.mark.parametrize(("fault", "fix"), [("401", "OPENAI_API_KEY"), ("403", "api_key in your YAML"),
                                            ("404", "/models lists them")])
def test_endpoint_errors_stop_after_one_request(fault: str, fix: str) -> None:
    with StubOpenAIServer([fault] * 5) as srv:
        llm = backend(srv.base_url)
        with pytest.raises(EndpointError) as info:
            llm.chat(MSGS)
        assert srv.requests == 1 and llm.attempts == 1
        msg = str(info.value)
        assert srv.base_url in msg and "stub-model" in msg and fix in msg and fault in msg
        assert info.value.status == int(fault) and info.value.endpoint == srv.base_url
        assert classify(info.value) == "fatal"
        # the items still in flight (other threads, later calls) send nothing more: the same error, no request
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            later = [pool.submit(llm.chat, MSGS) for _ in range(6)]
        for f in later:
            assert isinstance(f.exception(), EndpointError) and str(f.exception()) == msg
        assert srv.requests == 1 and llm.attempts == 1


def test_unknown_model_in_a_400_is_an_endpoint_error() -> None:
    err = status_error(400, "Error code: 400 - The model `gpt-9` does not exist", base_url="http://h/v1",
                       model="gpt-9")
    assert isinstance(err, EndpointError) and "check the model name" in str(err) and "http://h/v1/models" in str(err)


def test_over_context_is_model_limited_after_one_request() -> None:
    with StubOpenAIServer(["context"] * 5) as srv:
        llm = backend(srv.base_url)
        with pytest.raises(ContextLimitError) as info:
            llm.chat(MSGS)
        assert srv.requests == 1
        assert "9098" in str(info.value) and classify(info.value) == "model_limited"


@pytest.mark.parametrize("detail", [
    "This model's maximum context length is 8192 tokens. However, you requested 9098 tokens",  # vLLM / OpenAI
    "the request exceeds the available context size, try increasing it",  # llama.cpp server
    "Input length 9000 exceeds the context length 8192",  # SGLang-style
])
def test_context_messages_of_each_server(detail: str) -> None:
    assert isinstance(status_error(400, detail, base_url="u", model="m"), ContextLimitError)


def test_other_4xx_is_fatal_and_5xx_an_outage() -> None:
    for status, kind in [(400, "fatal"), (422, "fatal"), (429, "outage"), (500, "outage"), (503, "outage")]:
        err = status_error(status, "nope", base_url="u", model="m")
        assert type(err) is LLMError and classify(err) == kind, status


def test_length_finish_with_empty_or_null_content_is_a_valid_completion() -> None:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "length"},
                        {"index": 1, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 0}}
    parsed = parse_completion_body(json.dumps(body))
    assert [c.finish_reason for c in parsed.choices] == ["length", "length"]
    with pytest.raises(ParseError, match="neither content nor tool calls"):
        body["choices"][0]["finish_reason"] = "stop"
        parse_completion_body(json.dumps(body))


def test_tool_call_arguments_may_be_empty_and_content_parts_are_joined() -> None:
    reply = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": ""}}]}
    with StubOpenAIServer(reply=reply) as srv:
        out = backend(srv.base_url).chat(MSGS, tools=TOOLS)
    assert out[0].text == "ab" and out[0].tool_calls[0].arguments == {} and out[0].tool_calls[0].id == "c1"


def test_a_refused_connection_is_a_retryable_outage_counted_per_attempt() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIBackend("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1,
                        backoff_initial=0.01, backoff_max=0.02, timeout=5)
    with pytest.raises(LLMError) as err:
        llm.chat([Message(role="user", content="hi")])
    assert err.value.is_retryable and "connection error" in str(err.value)
    assert llm.attempts == 2


def test_the_request_carries_the_key_and_a_json_body() -> None:
    seen: list[dict[str, str]] = []
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"auth": self.headers.get("Authorization", ""), "type": self.headers.get("Content-Type", ""),
                         "path": self.path, "model": body["model"], "text": body["messages"][0]["content"]})
            out = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            pass

    import threading

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        llm = OpenAIBackend("my-model", base_url=f"http://127.0.0.1:{srv.server_port}/v1/", api_key="sk-test")
        assert llm.chat([Message(role="user", content="héllo")])[0].text == "ok"
    finally:
        srv.shutdown()
    assert seen == [{"auth": "Bearer sk-test", "type": "application/json", "path": "/v1/chat/completions",
                     "model": "my-model", "text": "héllo"}]


def test_proxy_and_certificates_come_from_the_environment(monkeypatch, tmp_path) -> None:
    import certifi
    import urllib3

    from agentrag.llm.openai_backend import _pool_manager

    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                 "all_proxy", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    direct = _pool_manager("https://api.example.com/v1")
    assert type(direct) is urllib3.PoolManager and direct.connection_pool_kw["ca_certs"] == certifi.where()
    assert "ca_certs" not in _pool_manager("http://localhost:8000/v1").connection_pool_kw
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    proxied = _pool_manager("https://api.example.com/v1")
    assert isinstance(proxied, urllib3.ProxyManager) and proxied.proxy.host == "proxy.internal"
    assert type(_pool_manager("http://localhost:8000/v1")) is urllib3.PoolManager  # no proxy for http set
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    assert type(_pool_manager("https://api.example.com/v1")) is urllib3.PoolManager
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert _pool_manager("https://api.example.com/v1").connection_pool_kw["ca_certs"] == str(bundle)
