"""The OpenAI-compatible server in front of an LLM, with OpenAIBackend as its client (fake LLM)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from agentrag.errors import ContextLimitError, LLMError
from agentrag.llm import OpenAIBackend
from agentrag.llm.server import create_app
from agentrag.records import Message, ToolCall
from agentrag.testing import ScriptedLLM

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


@pytest.fixture()
def served():
    import uvicorn

    def start(llm):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = uvicorn.Server(uvicorn.Config(create_app(llm), host="127.0.0.1", port=port, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.time() + 10
        while not server.started and time.time() < deadline:
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}/v1"

    servers: list = []
    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=5)


def test_roundtrip_text_tool_calls_and_request(served) -> None:
    fake = ScriptedLLM(["plain answer", ToolCall(name="search", arguments={"query": "x"})])
    url = served(fake)
    client = OpenAIBackend("scripted", base_url=url, api_key="k", timeout=5, max_retries=0)
    history = [Message(role="user", content="q"),
               Message(role="assistant", tool_calls=[ToolCall(id="c0", name="search", arguments={"query": "a"})]),
               Message(role="tool", content="obs", tool_call_id="c0", name="search")]
    out = client.chat(history, temperature=0.1, max_tokens=9, seed=3, stop="END")
    assert out[0].text == "plain answer"
    req = fake.requests[0]
    assert req["messages"] == history
    assert (req["temperature"], req["max_tokens"], req["seed"], req["stop"]) == (0.1, 9, 3, ["END"])
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}
    out = client.chat([Message(role="user", content="q")], tools=TOOLS, response_format=fmt)
    assert out[0].tool_calls[0].name == "search" and out[0].tool_calls[0].arguments == {"query": "x"}
    assert out[0].finish_reason == "tool_calls"
    assert fake.requests[1]["tools"] == TOOLS and fake.requests[1]["response_format"] == fmt


def test_backend_errors_become_http_500(served) -> None:
    url = served(ScriptedLLM([LLMError("model exploded")]))
    client = OpenAIBackend("scripted", base_url=url, api_key="k", timeout=5, max_retries=0)
    with pytest.raises(LLMError, match="500"):
        client.chat([Message(role="user", content="q")])


def test_over_context_is_a_400_the_client_maps_back(served) -> None:
    over = ContextLimitError("embedded model m: the prompt has 300 tokens (+ max_tokens 512), over the model's "
                             "maximum context length of 256 tokens (n_ctx); shorten the input or raise n_ctx")
    fake = ScriptedLLM([over, "", "after"])
    client = OpenAIBackend("scripted", base_url=served(fake), api_key="k", timeout=5, max_retries=3,
                           backoff_initial=0.01)
    with pytest.raises(ContextLimitError, match="300 tokens"):
        client.chat([Message(role="user", content="q")])
    assert fake.calls == 1 and client.attempts == 1  # not retried
    empty = client.chat([Message(role="user", content="q")])  # an empty reply is a valid completion
    assert empty[0].text == "" and fake.calls == 2 and client.attempts == 2


def test_bad_requests_are_400() -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app(ScriptedLLM(default="x")))
    assert client.post("/v1/chat/completions", content=b"nope").status_code == 400
    assert client.post("/v1/chat/completions", json={"messages": "hi"}).status_code == 400
    assert client.post("/v1/chat/completions", json={"messages": [{"role": "wizard", "content": "x"}]}).status_code == 400
    assert client.get("/health").json()["status"] == "ok"
    ok = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "n": 2})
    assert [c["message"]["content"] for c in ok.json()["choices"]] == ["x", "x"]
