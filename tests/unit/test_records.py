from __future__ import annotations

import json

import pytest

from agentrag.errors import UserError
from agentrag.records import (
    SCHEMA_VERSION,
    Message,
    Passage,
    QAItem,
    ToolCall,
    Trajectory,
    read_jsonl,
    write_jsonl,
)


def test_roundtrip(tmp_path):
    items = [QAItem(id=f"q{i}", question=f"Q{i}?", golden_answers=[str(i)]) for i in range(3)]
    path = tmp_path / "qa.jsonl"
    assert write_jsonl(path, items) == 3
    back = list(read_jsonl(path, QAItem))
    assert back == items
    assert all(b.schema_version == SCHEMA_VERSION for b in back)


def test_bad_line_names_file_line_and_field(tmp_path):
    path = tmp_path / "qa.jsonl"
    good = QAItem(id="a", question="q", golden_answers=["x"]).model_dump_json()
    bad = json.dumps({"id": "b", "question": "q", "golden_answers": "not-a-list"})
    path.write_text(good + "\n\n" + bad + "\n")
    with pytest.raises(UserError) as exc:
        list(read_jsonl(path, QAItem))
    msg = str(exc.value)
    assert f"{path}:3" in msg and "golden_answers" in msg


def test_bad_json_and_bytes(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a", "question": "q"\n')
    with pytest.raises(UserError, match=r"x.jsonl:1: invalid JSON"):
        list(read_jsonl(path, QAItem))
    path.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(UserError, match=r"x.jsonl:1: not valid UTF-8"):
        list(read_jsonl(path, QAItem))


def test_unknown_field_rejected(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"id": "a", "title": "t", "text": "x", "bogus": 1}) + "\n")
    with pytest.raises(UserError, match="bogus"):
        list(read_jsonl(path, Passage))


def test_message_to_openai_serializes_arguments():
    m = Message(role="assistant", content=None, tool_calls=[ToolCall(id="c1", name="search", arguments={"query": "x"})])
    out = m.to_openai()
    assert out["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"query": "x"}'}


def test_passage_contents_and_trajectory_defaults():
    assert Passage(id="1", title="T", text="body").contents == "T\nbody"
    t = Trajectory(id="t", question="q")
    assert t.finish_reason == "answered" and t.steps == []
