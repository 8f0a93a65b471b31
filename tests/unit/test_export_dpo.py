from __future__ import annotations

import json

import pytest

from agentrag.errors import UserError
from agentrag.export.dpo import (
    dpo_dataset_info,
    ranking_split,
    read_pairs,
    read_trl_dpo,
    to_alpaca_dpo,
    to_sharegpt_dpo,
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


def plain_pair(i: int = 0) -> PreferencePair:
    return PreferencePair(id=f"plain{i}", prompt=[Message(role="system", content="SYS"),
                                                  Message(role="user", content=f"Q{i}?")],
                          chosen=[Message(role="assistant", content="<answer>A</answer>")],
                          rejected=[Message(role="assistant", content="<answer>B</answer>")])


def tool_pair() -> PreferencePair:
    """A pair at the second step of a search: the prompt holds a tool call and its observation;
    the chosen side searches again (and its observation and answer follow), the rejected answers."""
    call = ToolCall(id="c0", name="dense_search", arguments={"query": "q0"})
    return PreferencePair(
        id="t0",
        prompt=[Message(role="system", content="SYS"), Message(role="user", content="Q?"),
                Message(role="assistant", content="look it up", tool_calls=[call]),
                Message(role="tool", tool_call_id="c0", content="OBS-1 first documents")],
        chosen=[Message(role="assistant", content="need more",
                        tool_calls=[ToolCall(id="c1", name="dense_search", arguments={"query": "q1"})]),
                Message(role="tool", tool_call_id="c1", content="OBS-2 second documents"),
                Message(role="assistant", content="<answer>A</answer>")],
        rejected=[Message(role="assistant", content="<answer>B</answer>")])


def test_sharegpt_ranking_with_tool_turns():
    (rec,) = to_sharegpt_dpo([tool_pair()])
    assert set(rec) == {"conversations", "chosen", "rejected", "system", "tools"}
    assert rec["system"] == "SYS" and rec["tools"] == ""
    assert [t["from"] for t in rec["conversations"]] == ["human", "function_call", "observation"]
    assert rec["conversations"][1]["value"] == (
        'look it up\n<tool_call>{"name": "dense_search", "arguments": {"query": "q0"}}</tool_call>')
    assert rec["conversations"][2]["value"] == "OBS-1 first documents"
    assert rec["chosen"] == {"from": "function_call", "value": 'need more\n<tool_call>{"name": "dense_search", '
                                                             '"arguments": {"query": "q1"}}</tool_call>'}
    assert rec["rejected"] == {"from": "gpt", "value": "<answer>B</answer>"}
    # no observation (nor anything after the first differing turn) in a response
    for side in (rec["chosen"], rec["rejected"]):
        assert "OBS" not in side["value"] and "assistant:" not in side["value"]
    assert ranking_split(tool_pair())[3] is True  # the chosen side was cut after its call
    tools = [{"type": "function", "function": {"name": "dense_search", "parameters": {}}}]
    assert json.loads(to_sharegpt_dpo([tool_pair()], tools)[0]["tools"]) == [tools[0]["function"]]


def test_sharegpt_ranking_shared_leading_turns_go_to_the_prefix():
    p = tool_pair()
    same = [Message(role="assistant", content="look again",
                    tool_calls=[ToolCall(id="x", name="dense_search", arguments={"query": "q2"})]),
            Message(role="tool", tool_call_id="x", content="OBS-3")]
    p.chosen = same + [Message(role="assistant", content="<answer>A</answer>")]
    p.rejected = [m.model_copy() for m in same] + [Message(role="assistant", content="<answer>B</answer>")]
    p.rejected[0].tool_calls = [ToolCall(id="y", name="dense_search", arguments={"query": "q2"})]  # other id
    (rec,) = to_sharegpt_dpo([p])
    assert [t["from"] for t in rec["conversations"]] == ["human", "function_call", "observation",
                                                         "function_call", "observation"]
    assert rec["conversations"][-1]["value"] == "OBS-3"
    assert rec["chosen"]["value"] == "<answer>A</answer>" and rec["rejected"]["value"] == "<answer>B</answer>"
    assert ranking_split(p)[3] is False


def test_sharegpt_ranking_rejects_pairs_llamafactory_cannot_hold():
    p = tool_pair()
    p.rejected = list(p.chosen)
    with pytest.raises(UserError, match="'t0'.*do not differ"):
        to_sharegpt_dpo([p])
    p = tool_pair()  # same call, different observations: the pair differs at a tool turn
    p.rejected = [p.chosen[0], Message(role="tool", tool_call_id="c1", content="other")]
    with pytest.raises(UserError, match="first differ at turn 1 \\(tool vs tool\\)"):
        to_sharegpt_dpo([p])
    p = plain_pair()
    p.prompt = p.prompt + [Message(role="assistant", content="hm")]  # prompt ends on the model's turn
    with pytest.raises(UserError, match="alternate.*'human', 'gpt'"):
        to_sharegpt_dpo([p])


def test_plain_pairs_stay_valid_in_both_llamafactory_forms():
    (rec,) = to_sharegpt_dpo([plain_pair(1)])
    assert rec == {"conversations": [{"from": "human", "value": "Q1?"}], "chosen": {"from": "gpt", "value":
                   "<answer>A</answer>"}, "rejected": {"from": "gpt", "value": "<answer>B</answer>"},
                   "system": "SYS", "tools": ""}
    (alp,) = to_alpaca_dpo([plain_pair(1)])
    assert alp == {"instruction": "Q1?", "input": "", "chosen": "<answer>A</answer>",
                   "rejected": "<answer>B</answer>", "system": "SYS"}
    # a multi-turn plain chat is a valid sharegpt prefix
    p = plain_pair()
    p.prompt = p.prompt + [Message(role="assistant", content="which one?"), Message(role="user", content="the first")]
    assert [t["from"] for t in to_sharegpt_dpo([p])[0]["conversations"]] == ["human", "gpt", "human"]


def test_alpaca_never_flattens_tool_or_multi_turn_pairs():
    with pytest.raises(UserError, match="'t0'.*sharegpt ranking form"):
        to_alpaca_dpo([tool_pair()])
    p = plain_pair()
    p.prompt = p.prompt + [Message(role="assistant", content="x"), Message(role="user", content="y")]
    with pytest.raises(UserError, match="sharegpt ranking form"):
        to_alpaca_dpo([p])


def test_dataset_info_entries():
    info = dpo_dataset_info()
    assert info["agentrag_dpo"] == {
        "file_name": "dpo_sharegpt.jsonl", "ranking": True, "formatting": "sharegpt",
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", "system": "system",
                    "tools": "tools"},
        "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "observation_tag": "observation", "function_tag": "function_call"}}
    assert info["agentrag_dpo_alpaca"]["ranking"] is True
    assert info["agentrag_dpo_alpaca"]["columns"]["prompt"] == "instruction"
    assert set(dpo_dataset_info(alpaca=False)) == {"agentrag_dpo"}


def test_bad_pairs_are_user_errors(tmp_path):
    bad = make_pair()
    bad.rejected = []
    with pytest.raises(UserError, match="'p0'.*non-empty"):
        to_trl_dpo([bad])
    bad = make_pair()
    bad.chosen = [Message(role="user", content="x")]
    with pytest.raises(UserError, match="assistant"):
        to_sharegpt_dpo([bad])
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
    assert summary["sharegpt_cut"] == 3 and summary["alpaca"] == 0  # make_pair's chosen side has tool turns
    assert len((tmp_path / "o" / "dpo_sharegpt.jsonl").read_text().splitlines()) == 3
    assert (tmp_path / "o" / "dpo_alpaca.jsonl").read_text() == ""
    assert json.loads((tmp_path / "o" / "dataset_info.json").read_text()) == dpo_dataset_info(alpaca=False)
    summary = write_dpo_export(tmp_path / "m", [make_pair(0), plain_pair(1)])
    assert summary["alpaca"] == 1 and summary["sharegpt_cut"] == 1
    assert json.loads((tmp_path / "m" / "dataset_info.json").read_text()) == dpo_dataset_info()
    (tmp_path / "bad.jsonl").write_text(json.dumps({"prompt": [{"role": "user"}], "chosen": "x"}) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:1: field 'chosen'"):
        read_trl_dpo(tmp_path / "bad.jsonl")


def test_cli_export_dpo(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    write_jsonl(tmp_path / "pairs.jsonl", [make_pair(0), make_pair(1), tool_pair()])
    res = CliRunner().invoke(app, ["export", "dpo", "--pairs", str(tmp_path / "pairs.jsonl"),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "3 pairs cut" in res.output
    assert len((tmp_path / "o" / "trl_dpo.jsonl").read_text().splitlines()) == 3
    rows = [json.loads(line) for line in (tmp_path / "o" / "dpo_sharegpt.jsonl").read_text().splitlines()]
    assert [r["chosen"]["from"] for r in rows] == ["function_call", "function_call", "function_call"]
    assert [t["from"] for t in rows[2]["conversations"]] == ["human", "function_call", "observation"]
    assert not any("Doc 1 fact" in r[side]["value"] or "OBS" in r[side]["value"]
                   for r in rows for side in ("chosen", "rejected"))
