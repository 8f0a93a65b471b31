"""EmbeddedLLM logic with a stand-in llama object in the model cache (no model loaded)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from agentrag.errors import ContextLimitError, LLMError, UserError, classify
from agentrag.llm import embedded
from agentrag.llm.embedded import EmbeddedLLM
from agentrag.records import Message, ToolCall

TOOLS = [{"type": "function", "function": {"name": "search", "description": "look up",
                                           "parameters": {"type": "object",
                                                          "properties": {"query": {"type": "string"}}}}}]


class RecordingLlama:
    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.calls: list[dict] = []

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        text = self.outputs.pop(0)
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4}}


@pytest.fixture()
def fake_model(tmp_path: Path, monkeypatch):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    def install(outputs: list[str]) -> tuple[EmbeddedLLM, RecordingLlama]:
        llama = RecordingLlama(outputs)
        llm = EmbeddedLLM(path)
        c = llm.config
        key = embedded.model_key(path, c.n_ctx, c.n_threads, c.n_threads_batch, c.extra_buffer_types)
        monkeypatch.setitem(embedded._MODELS, key, (llama, threading.Lock()))
        return llm, llama
    return install


def test_tool_call_is_parsed_from_constrained_json(fake_model) -> None:
    llm, llama = fake_model(['{"name": "search", "arguments": {"query": "eiffel"}}', '{"answer": "Paris"}'])
    history = [Message(role="system", content="be brief"), Message(role="user", content="q"),
               Message(role="assistant", tool_calls=[ToolCall(name="search", arguments={"query": "a"})]),
               Message(role="tool", content="obs", name="search")]
    out = llm.chat(history, tools=TOOLS, n=2, seed=7, temperature=0.5)
    assert out[0].tool_calls[0].name == "search" and out[0].tool_calls[0].arguments == {"query": "eiffel"}
    assert out[0].finish_reason == "tool_calls" and out[0].text is None
    assert out[1].text == "Paris" and out[1].tool_calls == []
    first = llama.calls[0]
    assert first["response_format"]["schema"]["oneOf"][0]["properties"]["name"] == {"const": "search"}
    assert [c["seed"] for c in llama.calls] == [7, 8]
    rendered = first["messages"]
    assert rendered[0]["role"] == "system" and "search" in rendered[0]["content"] and "be brief" in rendered[0]["content"]
    assert json.loads(rendered[2]["content"]) == {"name": "search", "arguments": {"query": "a"}}
    assert rendered[3]["role"] == "user" and "obs" in rendered[3]["content"]
    assert llm.meter.snapshot()["completion_tokens"] == 8


def test_json_schema_response_format_is_passed_as_grammar(fake_model) -> None:
    llm, llama = fake_model(['{"city": "Paris"}'])
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    out = llm.chat([Message(role="user", content="q")],
                   response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
    assert json.loads(out[0].text) == {"city": "Paris"}
    assert llama.calls[0]["response_format"] == {"type": "json_object", "schema": schema}


def test_truncated_tool_output_becomes_answer_text(fake_model) -> None:
    llm, _ = fake_model(['{"name": "sea'])
    out = llm.chat([Message(role="user", content="q")], tools=TOOLS)
    assert out[0].tool_calls == [] and out[0].text == '{"name": "sea'


def test_unknown_sampling_keyword_and_missing_path(fake_model, tmp_path: Path) -> None:
    llm, _ = fake_model(["x"])
    with pytest.raises(UserError, match="top_k"):
        llm.chat([Message(role="user", content="q")], top_k=5)
    with pytest.raises(UserError, match="does not exist"):
        EmbeddedLLM(tmp_path / "nope.gguf")



class FailingLlama:
    """Raises ``error`` as llama-cpp-python does (e.g. for a prompt longer than n_ctx)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def create_chat_completion(self, **kwargs):
        raise self.error


def failing(llm: EmbeddedLLM, error: Exception, monkeypatch) -> None:
    c = llm.config
    key = embedded.model_key(llm.path, c.n_ctx, c.n_threads, c.n_threads_batch, c.extra_buffer_types)
    monkeypatch.setitem(embedded._MODELS, key, (FailingLlama(error), threading.Lock()))


def test_over_context_is_a_context_limit_error_with_the_counts(fake_model, monkeypatch) -> None:
    llm, _ = fake_model([])
    failing(llm, ValueError("Requested tokens (300) exceed context window of 256"), monkeypatch)
    with pytest.raises(ContextLimitError) as info:
        llm.chat([Message(role="user", content="q " * 300)], max_tokens=64)
    msg = str(info.value)
    assert "300 tokens" in msg and "256" in msg and "max_tokens 64" in msg and "n_ctx" in msg
    assert classify(info.value) == "model_limited"


def test_other_llama_errors_are_fatal_llm_errors(fake_model, monkeypatch) -> None:
    llm, _ = fake_model([])
    failing(llm, RuntimeError("llama_decode returned -3"), monkeypatch)
    with pytest.raises(LLMError, match="llama_decode") as info:
        llm.chat([Message(role="user", content="q")])
    assert not isinstance(info.value, ContextLimitError) and classify(info.value) == "fatal"


def test_a_file_that_is_not_a_model_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model")
    llm = EmbeddedLLM(bad)
    with pytest.raises(UserError, match="cannot load the embedded model") as info:
        llm.chat([Message(role="user", content="q")])
    assert "GGUF" in str(info.value) and classify(info.value) == "fatal"
