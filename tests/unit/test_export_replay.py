"""Eval -> SFT replays what each agent sent: every agent is run with a scripted model that logs each
request with the reply it got, the trajectory goes through JSON (as in an eval run's results) and
is exported, and the exported chats must be the requests turn for turn: every assistant turn of a
record is the model's reply to exactly the messages before it, every request the agent made is
in a record, no turn is made up, and the tools listed are the tools the agent offered. The
sharegpt records must load in LLaMA-Factory (alternating turns). search_r1, whose requests carry
the stream as one assistant message, has its own replay in test_export_protocol_agents.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from agentrag.agents import build_agent
from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM
from agentrag.agents.prompts import PLAN_USER, REACT_FORCE_ANSWER, STEP_USER
from agentrag.cli.main import app
from agentrag.eval.result import EvalResult
from agentrag.export.sft import message_dict, to_sharegpt, to_trl_records
from agentrag.llm.base import Completion
from agentrag.llm.parsing import split_think
from agentrag.records import Passage, QAItem, ToolCall, Trajectory
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id="p1", title="Everest", text="Everest is 8848 m high."),
            Passage(id="p2", title="K2", text="K2 is 8611 m high."),
            Passage(id="p3", title="Lhotse", text="Lhotse is 8516 m high.")]
ITEM = QAItem(id="q1", question="How much higher is Everest than K2?", golden_answers=["237 m"])

Reply = str | ToolCall | list[ToolCall] | Completion


class Log:
    """What the model was sent and what it replied, pair by pair (thread-safe: planner_executor
    runs the executor calls of one planner turn concurrently)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, Reply]] = []
        self._lock = threading.Lock()

    def reply(self, reply: Reply) -> Callable[..., Reply]:
        def answer(messages: list[Any], **kwargs: Any) -> Reply:
            with self._lock:
                self.pairs.append(([message_dict(m) for m in messages], kwargs.get("tools"), reply))
            return reply
        return answer


def run(agent: str, replies: list[Reply] | Callable[[list[Any]], Reply], **cfg: Any) -> tuple[Log, ScriptedLLM, Trajectory]:
    log = Log()
    if callable(replies):  # a reply chosen from the request (concurrent executor calls)
        pick = replies
        llm = ScriptedLLM(default=lambda messages, **kw: log.reply(pick(messages))(messages, **kw))
    else:
        llm = ScriptedLLM([log.reply(r) for r in replies])
    traj = build_agent(agent, llm, FakeRetriever(PASSAGES), **cfg).run(ITEM)
    return log, llm, Trajectory.model_validate_json(traj.model_dump_json())  # as stored in results.jsonl


def _reply_matches(turn: dict[str, Any], reply: Reply) -> bool:
    if isinstance(reply, Completion):  # a reasoning model's: the <think> text is not sent back
        return _reply_matches(turn, list(reply.tool_calls) or split_think(reply.text)[0] or "")
    if isinstance(reply, str):
        return turn["content"] == reply and "tool_calls" not in turn
    calls = [reply] if isinstance(reply, ToolCall) else reply
    sent = [(c["function"]["name"], c["function"]["arguments"]) for c in turn.get("tool_calls", [])]
    return sent == [(c.name, c.arguments) for c in calls]


def assert_replays(log: Log, llm: ScriptedLLM, records: list[dict[str, Any]]) -> None:
    assert len(log.pairs) == llm.calls
    used: set[int] = set()
    for rec in records:
        msgs = rec["messages"]
        assert msgs[-1]["role"] == "assistant"  # a record ends on what the model wrote
        for k, turn in enumerate(msgs):
            if turn["role"] != "assistant":
                continue
            match = [i for i, (sent, _, reply) in enumerate(log.pairs)
                     if i not in used and sent == msgs[:k] and _reply_matches(turn, reply)]
            assert match, f"assistant turn {k} is no reply to the messages before it: {turn}"
            used.add(match[0])
            tools = log.pairs[match[0]][1]
            if tools:
                assert rec["tools"] == tools
    assert used == set(range(len(log.pairs))), "a request the agent made is in no record"


def assert_llamafactory_loads(records: list[dict[str, Any]]) -> None:
    """LLaMA-Factory's sharegpt reader: human/observation and gpt/function_call turns alternate,
    starting with human, and their count is even."""
    for rec in records:
        turns = [t["from"] for t in rec["conversations"]]
        assert turns and len(turns) % 2 == 0, turns
        for i, tag in enumerate(turns):
            assert tag in (("human", "observation"), ("gpt", "function_call"))[i % 2], turns


def check(log: Log, llm: ScriptedLLM, traj: Trajectory) -> list[dict[str, Any]]:
    records = to_trl_records([traj], only_answered=False)
    assert_replays(log, llm, records)
    share = to_sharegpt([traj], only_answered=False)
    assert len(share) == len(records)
    assert_llamafactory_loads(share)
    for rec, sg in zip(records, share, strict=True):
        n_model = sum(m["role"] == "assistant" for m in rec["messages"])
        assert sum(t["from"] in ("gpt", "function_call") for t in sg["conversations"]) == n_model
    return records


def test_react_replay_with_feedback_unknown_tool_and_forced_answer():
    log, llm, traj = run("react", [
        ToolCall(name="dense_search", arguments={"query": "Everest height"}),
        "I think it is high.",  # no tags: fed back as a format error
        ToolCall(name="web_search", arguments={"query": "K2"}),  # unknown tool: an error observation
        ToolCall(name="dense_search", arguments={"query": "K2 height"}),
        "<answer>237 m</answer>",  # the forced last turn
    ], max_steps=5, untagged_answer="reject")
    assert traj.finish_reason == "answered" and llm.calls == 5
    [rec] = check(log, llm, traj)
    assert rec["messages"][-2] == {"role": "user", "content": REACT_FORCE_ANSWER}
    assert rec["tools"] == traj.metadata["tools"]


def test_plan_step_replay_with_the_plan_and_every_step_prompt():
    log, llm, traj = run("plan_step", [
        "1. Everest's height 2. K2's height",
        "I should search first.",  # no tool call: re-asked with the step prompt alone
        [ToolCall(name="RAG_search", arguments={"query": "Everest height", "topk": 1}),
         ToolCall(name="RAG_search", arguments={"query": "K2 height", "topk": 1})],
        ToolCall(name="Lookup", arguments={"x": 1}),  # unknown tool
        ToolCall(name="Final_Answer", arguments={"answer": "237 m"}),
    ])
    assert traj.finish_reason == "answered" and traj.answer == "237 m"
    [rec] = check(log, llm, traj)
    msgs = rec["messages"]
    assert msgs[1]["content"] == PLAN_USER.format(question=ITEM.question)
    assert sum(m == {"role": "user", "content": STEP_USER} for m in msgs) == 4
    assert msgs[-1]["tool_calls"][0]["function"]["name"] == "Final_Answer"  # no made-up answer turn after it
    assert {t["function"]["name"] for t in rec["tools"]} == {"RAG_search", "Final_Answer"}


def test_plan_step_replay_ending_with_a_text_answer():
    log, llm, traj = run("plan_step", ["1. search", ToolCall(name="RAG_search", arguments={"query": "Everest",
                                                                                           "topk": 2}),
                                       "Everest is 237 m higher.\nFinal_Answer: 237 m"])
    assert traj.answer == "237 m"
    check(log, llm, traj)


def _pe_model(messages: list[Any]) -> Reply:
    """The planner and the executor, chosen from the request (the executor calls run concurrently)."""
    if messages[0].content == EXECUTOR_SYSTEM:
        which = "Everest" if "Everest" in messages[1].content.split("\n")[0] else "K2"
        return f"<think>The evidence gives {which}'s height.</think><select>[0]</select>" \
               f"<answer>{which} is {'8848' if which == 'Everest' else '8611'} m high.</answer>"
    planner_turns = sum(m.role == "assistant" for m in messages)
    if planner_turns == 0:
        return "<think>Compare the two heights.</think>\n<action>\nSearch(\"How high is Everest?\")\n" \
               "Search(\"How high is K2?\")\n</action>"
    if planner_turns == 1:
        return "I will answer 237 m"  # malformed: reminded
    return "<think>8848 - 8611 = 237.</think>\n<answer>237 m</answer>"


def test_planner_executor_replay_planner_and_executor_chats():
    log, llm, traj = run("planner_executor", _pe_model, max_steps=3)
    assert traj.finish_reason == "answered" and traj.answer == "237 m" and llm.calls == 5
    records = check(log, llm, traj)
    planner, *executors = records
    assert planner["tools"] == [] and all(r["tools"] == [] for r in executors)
    assert planner["messages"][1]["content"] == f"Question: {ITEM.question}"
    assert "Please follow the format" in planner["messages"][5]["content"]
    assert "Give the final answer now" in planner["messages"][5]["content"]  # the last turn's instruction
    assert len(executors) == 2 and all(r["messages"][0]["content"] == EXECUTOR_SYSTEM for r in executors)
    assert not any("<tool_call>" in m["content"] for r in records for m in r["messages"])


def test_planner_executor_export_cuts_passages_as_the_executor_saw_them():
    log, llm, traj = run("planner_executor", _pe_model, max_steps=3, max_passage_chars=50,
                         top_k=1)
    assert traj.metadata["max_passage_chars"] == 50
    check(log, llm, traj)


def test_reason_ground_replay_every_round():
    log, llm, traj = run("reason_ground", ["Need Everest. <query>Everest height</query>",
                                           "<evidence>Everest is 8848 m high.</evidence>",
                                           "Need K2. <query>K2 height</query>",
                                           "<evidence>K2 is 8611 m high.</evidence>",
                                           "So <answer>237 m</answer>"])
    assert traj.finish_reason == "answered"
    check(log, llm, traj)


def test_a_trajectory_whose_steps_were_edited_exports_its_steps(caplog):
    log, llm, traj = run("plan_step", ["1. search", ToolCall(name="RAG_search", arguments={"query": "Everest",
                                                                                           "topk": 1}),
                                       ToolCall(name="Final_Answer", arguments={"answer": "237 m"})])
    traj.steps[1].observation = "edited after the run"
    [rec] = to_trl_records([traj])
    assert "edited after the run" in [m["content"] for m in rec["messages"]]
    assert "does not match its steps" in caplog.text


@pytest.mark.parametrize("agent", ["plan_step", "planner_executor"])
def test_the_cli_exports_an_eval_run_as_the_agent_sent_it(tmp_path, agent):
    if agent == "plan_step":
        log, llm, traj = run(agent, ["1. search", ToolCall(name="RAG_search", arguments={"query": "Everest",
                                                                                           "topk": 1}),
                                     ToolCall(name="Final_Answer", arguments={"answer": "237 m"})])
    else:
        log, llm, traj = run(agent, _pe_model, max_steps=3)
    row = EvalResult(id=traj.id, question=traj.question, golden_answers=["237 m"], prediction=traj.answer, em=1.0,
                     correct=True, trajectory=traj)
    (tmp_path / "results.jsonl").write_text(row.model_dump_json() + "\n")
    res = CliRunner().invoke(app, ["export", "sft", "-t", str(tmp_path / "results.jsonl"), "--where", "correct",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "out" / "trl_sft.jsonl").read_text().splitlines()
    assert_replays(log, llm, [json.loads(line) for line in lines])
    assert_llamafactory_loads([json.loads(line) for line in (tmp_path / "out" / "sharegpt.jsonl").read_text()
                               .splitlines()])


def test_plan_step_export_with_reasoning_and_a_system_prompt_of_the_user():
    think = Completion(text="<think>Search Everest first.</think>", tool_calls=[
        ToolCall(id="c1", name="RAG_search", arguments={"query": "Everest", "topk": 1})], finish_reason="tool_calls")
    log, llm, traj = run("plan_step", ["1. search", think, ToolCall(name="Final_Answer", arguments={"answer": "237 m"})])
    assert traj.steps[1].reasoning == "Search Everest first."
    [plain] = check(log, llm, traj)  # the reasoning was not sent back: the plain export is what was sent
    [kept] = to_trl_records([traj], "MY SYSTEM", reasoning=True)
    assert kept["messages"][0] == {"role": "system", "content": "MY SYSTEM"}
    assert kept["messages"][4]["content"] == "<think>\nSearch Everest first.\n</think>\n\n"
    assert kept["messages"][4]["tool_calls"] == plain["messages"][4]["tool_calls"]
    assert kept["messages"][1:4] + kept["messages"][5:] == plain["messages"][1:4] + plain["messages"][5:]


@pytest.mark.parametrize("agent,replies,cfg", [
    ("naive", ["Everest is higher by 237 m."], {}),
    ("standard_rag", ["237 m"], {"top_k": 2}),
    ("iter_retgen", ["Everest is 8848 m high.", "K2 is 8611 m high.", "237 m"], {"iterations": 3, "top_k": 1}),
    ("ircot", ["Everest is 8848 m high. And more text.", "   ", "K2 is 8611 m high.", "So the answer is: 237 m."],
     {"top_k": 2, "max_paragraphs": 2, "doc_chars": 60, "max_iter": 5}),
])
def test_baselines_export_one_chat_per_llm_call_as_sent(agent, replies, cfg):
    log, llm, traj = run(agent, replies, **cfg)
    assert traj.finish_reason == "answered", traj
    records = to_trl_records([traj])
    assert all(r["tools"] == [] and len(r["messages"]) == 3 for r in records)  # no tool the pipeline never offered
    usable = [(sent, reply) for sent, _, reply in log.pairs if str(reply).strip()]
    assert len(records) == len(usable)
    for rec, (sent, reply) in zip(records, usable, strict=True):
        assert rec["messages"][:-1] == sent
        kept = rec["messages"][-1]
        assert kept["role"] == "assistant" and str(reply).startswith(kept["content"]) and kept["content"]
    assert_llamafactory_loads(to_sharegpt([traj]))
