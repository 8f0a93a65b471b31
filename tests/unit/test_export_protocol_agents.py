"""Eval -> SFT for the text-protocol agents writes what each agent sent: replaying the agent's
requests (recorded by the scripted LLM) against its exported records turn for turn, with its own
prompts, no tool schema and no made-up ``<tool_call>``; plus --min-judge without judge scores and
an export of 0 records are errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentrag.agents import build_agent
from agentrag.cli.main import app
from agentrag.eval.result import EvalResult
from agentrag.export.sft import to_sharegpt, to_trl_records
from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id="p1", title="Everest", text="Everest is 8848 m high."),
            Passage(id="p2", title="K2", text="K2 is 8611 m high.")]
ITEM = QAItem(id="q1", question="How high is Everest?", golden_answers=["8848 m"])


def _run(agent: str, script: list[str], **cfg) -> tuple[ScriptedLLM, object]:
    llm = ScriptedLLM(script)
    traj = build_agent(agent, llm, FakeRetriever(PASSAGES), **cfg).run(ITEM)
    return llm, traj


def _no_tool_protocol(records: list[dict]) -> None:
    for rec in records:
        assert rec["tools"] == []
        assert all("tool_calls" not in m and m["role"] != "tool" for m in rec["messages"])
        assert not any("<tool_call>" in m["content"] for m in rec["messages"])


def test_search_r1_export_replays_every_request_of_the_stream():
    llm, traj = _run("search_r1", ["<think>I need the height.</think><search>Everest height",
                                   "I am not sure what to do",
                                   "<think>Found it.</think><answer>8848 m</answer> trailing"])
    assert traj.finish_reason == "answered" and len(llm.requests) == 3
    [rec] = to_trl_records([traj])
    _no_tool_protocol([rec])
    msgs = rec["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert "<information>" in msgs[2]["content"] and "Doc 1(Title: Everest)" in msgs[2]["content"]
    for k, req in enumerate(llm.requests):
        sent = req["messages"]
        assert sent[0].role == "user" and sent[0].content == msgs[0]["content"]  # the agent's own prompt
        stream = "".join(m["content"] for m in msgs[1:1 + 2 * k])
        assert (sent[1].content if len(sent) > 1 else "") == stream
        assert msgs[1 + 2 * k]["role"] == "assistant"  # what the model wrote next is the target
    assert "".join(m["content"] for m in msgs[1:]) == traj.metadata["stream"]
    [share] = to_sharegpt([traj])
    assert share["tools"] == "" and share["system"] == ""
    assert [t["from"] for t in share["conversations"]] == ["human", "gpt", "human", "gpt", "human", "gpt"]


def _reason_ground_replay(llm: ScriptedLLM, traj) -> list[dict]:
    records = to_trl_records([traj])
    _no_tool_protocol(records)
    assert len(records) == len(llm.requests)  # one record per round (every round here gave a usable step)
    for rec, req, step in zip(records, llm.requests, traj.steps, strict=True):
        sent = [{"role": m.role, "content": m.content} for m in req["messages"]]
        assert rec["messages"][:-1] == sent
        assert rec["messages"][-1] == {"role": "assistant", "content": step.thought}
    return records


def test_reason_ground_export_is_one_record_per_round_with_the_rounds_prompt():
    llm, traj = _run("reason_ground", ["The height is needed. <query>Everest height</query> ignored",
                                       "<evidence>Everest is 8848 m high.</evidence>",
                                       "So the answer is <answer>8848 m</answer>"])
    assert traj.finish_reason == "answered"
    records = _reason_ground_replay(llm, traj)
    from agentrag.agents.prompts import GROUNDING_SYSTEM, REASONING_SYSTEM

    assert [r["messages"][0]["content"] for r in records] == [REASONING_SYSTEM, GROUNDING_SYSTEM, REASONING_SYSTEM]


def test_reason_ground_forced_round_is_exported_with_the_force_instruction():
    llm, traj = _run("reason_ground", ["<query>Everest height</query>", "<evidence>8848 m</evidence>",
                                       "So the answer is <answer>8848 m</answer>"], max_steps=1)
    assert traj.metadata.get("forced_round") == 2
    records = _reason_ground_replay(llm, traj)
    from agentrag.agents.prompts import FORCE_ANSWER

    assert FORCE_ANSWER in records[-1]["messages"][1]["content"]


def _results(tmp: Path, trajs, judge: int | None = None) -> Path:
    path = tmp / "results.jsonl"
    rows = [EvalResult(id=t.id, question=t.question, golden_answers=["8848 m"], prediction=t.answer, em=1.0,
                       correct=True, judge=judge, trajectory=t) for t in trajs]
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    return path


def test_min_judge_on_results_without_judge_scores_is_an_error(tmp_path):
    _, traj = _run("search_r1", ["<answer>8848 m</answer>"])
    res = CliRunner().invoke(app, ["export", "sft", "-t", str(_results(tmp_path, [traj])), "--min-judge", "1",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "no judge" in " ".join(res.output.split()) and not (tmp_path / "out").exists()


def test_an_export_of_zero_records_exits_3_with_the_reason(tmp_path):
    _, traj = _run("search_r1", ["no tags at all"] * 6)
    assert traj.finish_reason != "answered"
    res = CliRunner().invoke(app, ["export", "sft", "-t", str(_results(tmp_path, [traj])), "-o", str(tmp_path / "o")])
    assert res.exit_code == 3, res.output
    out = " ".join(res.output.split())
    assert "nothing exported" in out and "did not end with an answer" in out


def test_the_cli_export_of_a_search_r1_eval_lists_no_tool(tmp_path):
    _, traj = _run("search_r1", ["<search>Everest height", "<answer>8848 m</answer>"])
    res = CliRunner().invoke(app, ["export", "sft", "-t", str(_results(tmp_path, [traj], judge=2)),
                                   "--min-judge", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    rec = json.loads((tmp_path / "out" / "trl_sft.jsonl").read_text())
    assert rec["tools"] == [] and rec["messages"][0]["role"] == "user"


def test_function_calling_agents_export_the_tools_they_offered():
    from agentrag.records import ToolCall

    llm, traj = _run("react", [ToolCall(name="search", arguments={"query": "Everest"}), "<answer>8848 m</answer>"],
                     top_k=2)
    [rec] = to_trl_records([traj])
    assert rec["tools"] == llm.requests[0]["tools"]
    llm, traj = _run("plan_step", ["1. search", ToolCall(name="RAG_search", arguments={"query": "Everest", "topk": 2}),
                                   ToolCall(name="Final_Answer", arguments={"answer": "8848 m"})])
    [rec] = to_trl_records([traj])
    assert rec["tools"] == llm.requests[1]["tools"]
    assert {t["function"]["name"] for t in rec["tools"]} == {"RAG_search", "Final_Answer"}
