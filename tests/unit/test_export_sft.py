from __future__ import annotations

import json

import pytest

from agentrag.errors import UserError
from agentrag.export.sft import (
    read_trajectories,
    read_trl_records,
    sharegpt_dataset_info,
    to_sharegpt,
    to_trl_records,
    trajectory_messages,
    write_sft_export,
)
from agentrag.records import Step, ToolCall, Trajectory, write_jsonl

TOOLS = [{"type": "function", "function": {
    "name": "dense_search", "description": "search the KB",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
                   "required": ["query"]}}}]


def make_traj(i: int = 0, n_steps: int = 2, **kw) -> Trajectory:
    steps = [Step(thought=f"I need fact {j} of q{i}.",
                  action=ToolCall(id=f"c{j}" if j % 2 == 0 else "", name="dense_search",
                                  arguments={"query": f"fact {j} q{i}", **({"top_k": 3} if j == 0 else {})}),
                  observation=f"Doc 1 (Title: T{j}) OBSERVATION-{i}-{j} retrieved text.")
             for j in range(n_steps)]
    steps.append(Step(thought=f"Both facts are known now. <answer>Answer {i}</answer>"))
    data = dict(id=f"t{i}", question=f"Question number {i}?", steps=steps, answer=f"Answer {i}")
    data.update(kw)
    return Trajectory(**data)


def test_trl_record_structure():
    recs = to_trl_records([make_traj(0)], "SYS", TOOLS)
    assert len(recs) == 1
    msgs = recs[0]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert msgs[0]["content"] == "SYS" and msgs[1]["content"] == "Question number 0?"
    call = msgs[2]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "dense_search"
    assert call["function"]["arguments"] == {"query": "fact 0 q0", "top_k": 3}  # a JSON object, not a string
    assert msgs[2]["content"] == "I need fact 0 of q0."
    # every tool message answers the call right before it, ids generated where missing
    for a, t in [(msgs[2], msgs[3]), (msgs[4], msgs[5])]:
        assert t["tool_call_id"] == a["tool_calls"][0]["id"] != ""
    assert msgs[3]["content"].startswith("Doc 1 (Title: T0) OBSERVATION-0-0")
    assert msgs[-1] == {"role": "assistant", "content": "Both facts are known now. <answer>Answer 0</answer>"}
    assert recs[0]["tools"] == TOOLS


def test_unanswered_trajectories_are_skipped_unless_asked():
    trajs = [make_traj(0), make_traj(1, finish_reason="max_steps", answer=None), make_traj(2, answer="  ")]
    assert len(to_trl_records(trajs, "S", TOOLS)) == 1
    assert len(to_trl_records(trajs, "S", TOOLS, only_answered=False)) == 3


def test_system_prompt_falls_back_to_recorded_system_message():
    from agentrag.records import Message

    t = make_traj(0, messages=[Message(role="system", content="RECORDED")])
    assert trajectory_messages(t)[0].content == "RECORDED"
    assert trajectory_messages(t, "OVERRIDE")[0].content == "OVERRIDE"


def test_step_error_becomes_the_observation():
    t = make_traj(0, n_steps=1)
    t.steps[0].observation = None
    t.steps[0].error = "retrieval failed: timeout"
    msgs = to_trl_records([t], "S", TOOLS)[0]["messages"]
    assert msgs[3] == {"role": "tool", "content": "retrieval failed: timeout", "tool_call_id": "c0",
                       "name": "dense_search"}
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]


def test_answer_is_appended_when_the_steps_do_not_end_on_an_answer():
    t = make_traj(0, n_steps=1)
    t.steps.pop()  # e.g. answered through traj.answer only
    msgs = to_trl_records([t], "S", TOOLS)[0]["messages"]
    assert msgs[-1] == {"role": "assistant", "content": "Answer 0"}
    assert msgs[-2]["role"] == "tool"


def test_sharegpt_shape():
    rec = to_sharegpt([make_traj(3)], "SYS", TOOLS)[0]
    conv = rec["conversations"]
    assert [c["from"] for c in conv] == ["human", "function_call", "observation", "function_call",
                                         "observation", "gpt"]
    # LLaMA-Factory: human/observation at odd turns, gpt/function_call at even (1-based) turns
    for k, c in enumerate(conv):
        assert c["from"] in (("human", "observation") if k % 2 == 0 else ("gpt", "function_call"))
    thought, call = conv[1]["value"].split("\n", 1)  # LLaMA-Factory: thought\n<tool_call>{json}</tool_call>
    assert thought == "I need fact 0 of q3."
    assert call.startswith("<tool_call>") and call.endswith("</tool_call>")
    assert json.loads(call[len("<tool_call>"):-len("</tool_call>")]) == \
        {"name": "dense_search", "arguments": {"query": "fact 0 q3", "top_k": 3}}
    assert "OBSERVATION-3-1" in conv[4]["value"]
    assert conv[-1]["value"].endswith("<answer>Answer 3</answer>")
    assert rec["system"] == "SYS"
    tools = json.loads(rec["tools"])
    assert tools == [TOOLS[0]["function"]]


def test_function_call_without_a_thought_is_the_bare_json():
    traj = make_traj(4)
    traj.steps[0].thought = ""
    conv = to_sharegpt([traj], "SYS", TOOLS)[0]["conversations"]
    assert json.loads(conv[1]["value"])["arguments"]["query"] == "fact 0 q4"


def test_dataset_info_shape():
    info = sharegpt_dataset_info()
    (entry,) = info.values()
    assert entry["formatting"] == "sharegpt" and entry["file_name"] == "sharegpt.jsonl"
    assert entry["columns"] == {"messages": "conversations", "system": "system", "tools": "tools"}
    assert entry["tags"] == {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                             "assistant_tag": "gpt", "observation_tag": "observation",
                             "function_tag": "function_call"}


def test_write_sft_export_and_read_back(tmp_path):
    trajs = [make_traj(i) for i in range(3)] + [make_traj(9, finish_reason="llm_error", answer=None)]
    summary = write_sft_export(tmp_path / "out", trajs, "SYS", TOOLS)
    assert summary["exported"] == 3 and summary["skipped"] == 1
    lines = (tmp_path / "out" / "trl_sft.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len((tmp_path / "out" / "sharegpt.jsonl").read_text().splitlines()) == 3
    info = json.loads((tmp_path / "out" / "dataset_info.json").read_text())
    assert info == sharegpt_dataset_info()
    card = (tmp_path / "out" / "README.md").read_text()
    import yaml

    header = yaml.safe_load(card.split("---")[1])
    assert header["configs"][0]["data_files"] == [{"split": "train", "path": "trl_sft.jsonl"}]
    assert "- exported: 3" in card
    back = read_trl_records(tmp_path / "out" / "trl_sft.jsonl")
    assert back[1]["messages"] == to_trl_records([trajs[1]], "SYS", TOOLS)[0]["messages"]


def test_malformed_trajectory_line_names_file_and_line(tmp_path):
    p = tmp_path / "trajs.jsonl"
    write_jsonl(p, [make_traj(0)])
    with p.open("a") as fh:
        fh.write('{"id": "x", "question": "q", "steps": "not a list"}\n')
    with pytest.raises(UserError, match=r"trajs\.jsonl:2: .*steps"):
        read_trajectories(p)
    p.write_text(p.read_text().splitlines()[0] + "\n{broken\n")
    with pytest.raises(UserError, match=r"trajs\.jsonl:2: invalid JSON"):
        read_trajectories(p)


def test_malformed_trl_record_names_field(tmp_path):
    p = tmp_path / "sft.jsonl"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n"
                 + json.dumps({"messages": [{"role": "robot", "content": "q"}]}) + "\n")
    with pytest.raises(UserError, match=r"sft\.jsonl:1: .*no assistant"):
        read_trl_records(p)
    p.write_text(json.dumps({"messages": [{"role": "assistant", "content": "a"}]}) + "\n"
                 + json.dumps({"messages": [{"role": "robot", "content": "q"}]}) + "\n")
    with pytest.raises(UserError, match=r"sft\.jsonl:2: field 'messages.0.role'"):
        read_trl_records(p)


def test_cli_export_sft(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    p = tmp_path / "trajs.jsonl"
    write_jsonl(p, [make_traj(0), make_traj(1)])
    (tmp_path / "sys.txt").write_text("FROM FILE\n")
    res = CliRunner().invoke(app, ["export", "sft", "--trajectories", str(p), "--out", str(tmp_path / "o"),
                                   "--system-prompt", f"@{tmp_path / 'sys.txt'}"])
    assert res.exit_code == 0, res.output
    rec = json.loads((tmp_path / "o" / "trl_sft.jsonl").read_text().splitlines()[0])
    assert rec["messages"][0]["content"] == "FROM FILE"
    assert rec["tools"][0]["function"]["name"] == "dense_search"  # default tool: the agents' search tool
    p.write_text("{oops\n")
    res = CliRunner().invoke(app, ["export", "sft", "--trajectories", str(p), "--out", str(tmp_path / "o2")])
    assert res.exit_code == 2 and "trajs.jsonl:1" in res.output
