"""The real embedded model: in process, behind `agentrag llm serve`, and through the cache."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from agentrag.errors import ContextLimitError, classify
from agentrag.llm import CachedLLM, LLMConfig, OpenAIBackend, parse_json_output
from agentrag.records import Message
from extras_check import require_module

pytestmark = [pytest.mark.slow, pytest.mark.integration]

require_module("llama_cpp", "llm", import_it=False)  # no import: the model must start OpenMP itself

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 30}, "population": {"type": "integer"},
                         "capital": {"type": "boolean"}},
          "required": ["city", "population", "capital"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}
TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the knowledge base for passages.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 60},
                                                    "top_k": {"type": "integer"}},
                   "required": ["query", "top_k"]}}}]
ASK = [Message(role="system", content="You are a research assistant. Use the search tool to find facts."),
       Message(role="user", content="Who designed the Eiffel Tower? Search for it.")]


def check_city(obj: dict) -> None:
    assert set(obj) == {"city", "population", "capital"}
    assert isinstance(obj["city"], str) and isinstance(obj["capital"], bool)
    assert isinstance(obj["population"], int) and not isinstance(obj["population"], bool)


@pytest.fixture(scope="session")
def embedded_llm():
    from agentrag.llm.embedded import EmbeddedLLM

    return EmbeddedLLM()


@pytest.fixture(scope="session")
def served_url() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "agentrag", "llm", "serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"agentrag llm serve exited: {proc.stdout.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail("agentrag llm serve did not come up within 120 s")
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_served_json_schema_and_tool_call(served_url: str) -> None:
    client = OpenAIBackend("SmolLM2-135M-Instruct", base_url=served_url, api_key="none", timeout=120, max_retries=1)
    out = client.chat([Message(role="user", content="Describe Paris as JSON with city, population, capital.")],
                      response_format=FORMAT, temperature=0.0, max_tokens=96)
    check_city(parse_json_output(out[0].text))

    out = client.chat(ASK, tools=TOOLS, temperature=0.0, max_tokens=96)
    comp = out[0]
    assert comp.tool_calls, f"expected a tool call, got text {comp.text!r}"
    call = comp.tool_calls[0]
    assert call.name == "search" and isinstance(call.arguments["query"], str)
    assert isinstance(call.arguments["top_k"], int)
    assert client.attempts == 2 and client.meter.snapshot()["completion_tokens"] > 0


def test_served_over_context_is_a_context_limit_error(served_url: str) -> None:
    client = OpenAIBackend("SmolLM2-135M-Instruct", base_url=served_url, api_key="none", timeout=120, max_retries=2)
    with pytest.raises(ContextLimitError, match="maximum context length"):
        client.chat([Message(role="user", content="word " * 9000)], max_tokens=8)
    assert client.attempts == 1  # a 400 the client maps back; not retried


def test_embedded_over_context_is_a_context_limit_error() -> None:
    from agentrag.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(config=LLMConfig(backend="embedded", n_ctx=256))
    with pytest.raises(ContextLimitError) as info:
        llm.chat([Message(role="user", content="Paris is the capital of France. " * 60)], max_tokens=16)
    msg = str(info.value)
    assert "over the model's maximum context length of 256 tokens" in msg and "max_tokens 16" in msg
    assert classify(info.value) == "model_limited"
    short = llm.chat([Message(role="user", content="Say hi.")], max_tokens=8)  # the model still works
    assert short[0].usage.prompt_tokens < 256


def test_embedded_tools_always_parse(embedded_llm) -> None:
    outs = embedded_llm.chat(ASK + [Message(role="user", content="Or answer directly if you know.")],
                             tools=TOOLS, n=2, temperature=1.0, seed=1, max_tokens=64)
    assert len(outs) == 2
    for c in outs:
        assert bool(c.tool_calls) != bool(c.text), c
        if c.tool_calls:
            assert c.tool_calls[0].name == "search" and "query" in c.tool_calls[0].arguments


def test_embedded_seed_is_reproducible_and_threads_are_safe(embedded_llm) -> None:
    msgs = [Message(role="user", content="Name a fruit.")]
    results: list[str | None] = [None] * 4

    def work(i: int) -> None:
        results[i] = embedded_llm.chat(msgs, temperature=0.8, seed=42, max_tokens=16)[0].text

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and results[0]


def test_cache_second_run_makes_no_model_calls(embedded_llm, tmp_path) -> None:
    def run() -> tuple[list[str | None], CachedLLM]:
        cached = CachedLLM(embedded_llm, tmp_path / "llm_cache.sqlite")
        texts = [cached.chat([Message(role="user", content=q)], temperature=0.0, max_tokens=12)[0].text
                 for q in ("Say hi.", "Count to three.")]
        return texts, cached

    before = embedded_llm.meter.snapshot()["calls"]
    first, _ = run()
    mid = embedded_llm.meter.snapshot()["calls"]
    second, cached = run()
    assert mid - before == 2
    assert embedded_llm.meter.snapshot()["calls"] == mid
    assert second == first and cached.stats()["inner_calls"] == 0
    assert cached.stats()["hits"] == 2 and cached.stats()["completion_tokens"] > 0


def test_embedded_gguf_is_installed() -> None:
    from agentrag.paths import GGUF_NAME, embedded_gguf

    path = embedded_gguf()
    assert path.name == GGUF_NAME and path.stat().st_size > 10_000_000
