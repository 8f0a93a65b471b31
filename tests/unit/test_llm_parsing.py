"""parse_json_output, text tool calls, resolve_llm references and YAML configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrag.errors import ParseError, UserError
from agentrag.llm import LLMConfig, parse_json_output, parse_text_tool_calls
from agentrag.llm.embedded import tool_call_schema
from agentrag.llm.resolve import llm_config_from_ref

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('Sure! Here it is: {"a": {"b": "}"}} hope it helps', {"a": {"b": "}"}}),
    ('junk { not json } then {"ok": true}', {"ok": True}),
])
def test_parse_json_output(text: str, expected: dict) -> None:
    assert parse_json_output(text) == expected


@pytest.mark.parametrize("text", ["", None, "no json here", "[1, 2, 3]", '{"a": '])
def test_parse_json_output_raises(text) -> None:
    with pytest.raises(ParseError):
        parse_json_output(text)


def test_hermes_multiple_calls_and_unknown_tool() -> None:
    text = ('think first <tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>'
            '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"b\\"}"}</tool_call>')
    rest, calls = parse_text_tool_calls(text, TOOLS)
    assert rest == "think first"
    assert [c.arguments["query"] for c in calls] == ["a", "b"]
    assert [c.id for c in calls] == ["call_0", "call_1"]
    rest, calls = parse_text_tool_calls('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', TOOLS)
    assert calls == [] and "nope" in rest


def test_plain_text_is_not_a_call() -> None:
    assert parse_text_tool_calls("Paris is the capital.", TOOLS) == ("Paris is the capital.", [])
    assert parse_text_tool_calls("{broken", TOOLS) == ("{broken", [])


def test_tool_call_schema_has_one_branch_per_tool_plus_answer() -> None:
    schema = tool_call_schema(TOOLS)
    assert len(schema["oneOf"]) == 2
    assert schema["oneOf"][0]["properties"]["name"] == {"const": "search"}
    assert schema["oneOf"][1]["required"] == ["answer"]


def test_refs() -> None:
    assert llm_config_from_ref("embedded").backend == "embedded"
    cfg = llm_config_from_ref("openai:qwen@http://localhost:8000/v1", temperature=0.2)
    assert (cfg.backend, cfg.model, cfg.base_url, cfg.temperature) == ("openai", "qwen", "http://localhost:8000/v1", 0.2)
    with pytest.raises(UserError, match="not understood"):
        llm_config_from_ref("gpt4")
    with pytest.raises(UserError, match="missing model"):
        llm_config_from_ref("openai:")


def test_yaml_config_and_typo(tmp_path: Path) -> None:
    good = tmp_path / "llm.yaml"
    good.write_text("backend: openai\nmodel: m\ntimeout: 5\nconcurrency: 2\ntemperature: 0.7\n")
    cfg = llm_config_from_ref(str(good), timeout=9)
    assert isinstance(cfg, LLMConfig) and cfg.timeout == 9 and cfg.concurrency == 2
    assert cfg.sampling_defaults() == {"temperature": 0.7, "max_tokens": 512}
    bad = tmp_path / "bad.yaml"
    bad.write_text("backend: openai\ntimout: 5\n")
    with pytest.raises(UserError, match="timeout"):
        llm_config_from_ref(str(bad))
    with pytest.raises(UserError, match="not found"):
        llm_config_from_ref(str(tmp_path / "missing.yaml"))
