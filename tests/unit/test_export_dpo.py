from __future__ import annotations

import json

import pytest

from agentrag.errors import UserError
from agentrag.export.dpo import (
    alpaca_dataset_info,
    read_pairs,
    read_trl_dpo,
    to_alpaca_dpo,
    to_trl_dpo,
    write_dpo_export,
)
from agentrag.records import Message, PreferencePair, ToolCall, write_jsonl


def make_pair(i: int = 0) -> PreferencePair:
    return PreferencePair(
        id=f"p{i}",
        prompt=[Message(role="system", content="SYS"), Message(role="user", content=f"Q{i}?")],
        chosen=[Message(role="assistant", content="search first",
                        tool_calls=[ToolCall(id="c0", name="dense_search", arguments={"query": f"q{i}"})]),
                Message(role="tool", tool_call_id="c0", content="Doc 1 fact"),
                Message(role="assistant", content="<answer>A</answer>")],
        rejected=[Message(role="assistant", content="<answer>B</answer>")],
    )


def test_trl_dpo_shape():
    (rec,) = to_trl_dpo([make_pair()])
    assert set(rec) == {"prompt", "chosen", "rejected"}
    assert [m["role"] for m in rec["prompt"]] == ["system", "user"]
    assert [m["role"] for m in rec["chosen"]] == ["assistant", "tool", "assistant"]
    assert rec["chosen"][0]["tool_calls"][0] == {"id": "c0", "type": "function",
                                                 "function": {"name": "dense_search", "arguments": {"query": "q0"}}}
    assert rec["chosen"][1]["tool_call_id"] == "c0"
    assert rec["rejected"] == [{"role": "assistant", "content": "<answer>B</answer>"}]
    tools = [{"type": "function", "function": {"name": "dense_search", "parameters": {}}}]
    assert to_trl_dpo([make_pair()], tools)[0]["tools"] == tools


def test_alpaca_dpo_shape():
    (rec,) = to_alpaca_dpo([make_pair(1)])
    assert set(rec) == {"instruction", "input", "chosen", "rejected", "system"}
    assert rec["instruction"] == "Q1?" and rec["input"] == "" and rec["system"] == "SYS"
    assert rec["rejected"] == "<answer>B</answer>"
    assert '<tool_call>\n{"name": "dense_search", "arguments": {"query": "q1"}}\n</tool_call>' in rec["chosen"]
    assert "<tool_response>\nDoc 1 fact\n</tool_response>" in rec["chosen"]
    assert rec["chosen"].index("search first") < rec["chosen"].index("Doc 1 fact") < rec["chosen"].index("<answer>A")
    (entry,) = alpaca_dataset_info().values()
    assert entry["ranking"] is True and entry["file_name"] == "dpo_alpaca.jsonl"
    assert entry["columns"] == {"prompt": "instruction", "query": "input", "chosen": "chosen",
                                "rejected": "rejected", "system": "system"}


def test_multi_turn_prompt_is_flattened_with_roles():
    p = make_pair()
    p.prompt = p.prompt + p.chosen[:2]
    p.chosen = p.chosen[2:]
    rec = to_alpaca_dpo([p])[0]
    assert rec["instruction"].startswith("user: Q0?") and "<tool_response>" in rec["instruction"]


def test_bad_pairs_are_user_errors(tmp_path):
    bad = make_pair()
    bad.rejected = []
    with pytest.raises(UserError, match="'p0'.*non-empty"):
        to_trl_dpo([bad])
    bad = make_pair()
    bad.chosen = [Message(role="user", content="x")]
    with pytest.raises(UserError, match="assistant"):
        to_alpaca_dpo([bad])
    p = tmp_path / "pairs.jsonl"
    write_jsonl(p, [make_pair()])
    with p.open("a") as fh:
        fh.write('{"id": "x", "prompt": [], "chosen": [{"role": "nobody"}], "rejected": []}\n')
    with pytest.raises(UserError, match=r"pairs\.jsonl:2: .*chosen"):
        read_pairs(p)


def test_write_dpo_export(tmp_path):
    summary = write_dpo_export(tmp_path / "o", [make_pair(i) for i in range(3)])
    assert summary["exported"] == 3
    rows = read_trl_dpo(tmp_path / "o" / "trl_dpo.jsonl")
    assert len(rows) == 3 and rows[2]["prompt"][1]["content"] == "Q2?"
    assert len((tmp_path / "o" / "dpo_alpaca.jsonl").read_text().splitlines()) == 3
    assert json.loads((tmp_path / "o" / "dataset_info.json").read_text()) == alpaca_dataset_info()
    (tmp_path / "bad.jsonl").write_text(json.dumps({"prompt": [{"role": "user"}], "chosen": "x"}) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:1: field 'chosen'"):
        read_trl_dpo(tmp_path / "bad.jsonl")


def test_cli_export_dpo(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    write_jsonl(tmp_path / "pairs.jsonl", [make_pair(0), make_pair(1)])
    res = CliRunner().invoke(app, ["export", "dpo", "--pairs", str(tmp_path / "pairs.jsonl"),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "o" / "trl_dpo.jsonl").read_text().splitlines()) == 2
