"""SFT export: trajectories as TRL conversational records and LLaMA-Factory sharegpt records.

A trajectory (question, steps of (thought, action, observation), answer) becomes one chat:
``system, user(question), assistant(thought + tool_call), tool(observation), ..., assistant(answer)``.
Observations are ``role: tool`` messages, so a training template that marks only assistant
turns as generated (RAGShaper Eq. 9) leaves every retrieved document out of the loss; see
:mod:`agentrag.export.masking`.

Only answered trajectories are exported by default: a trajectory that ran out of steps or
failed to parse is no demonstration to imitate.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError, writing
from agentrag.export.hf import write_card
from agentrag.paths import check_out_dir
from agentrag.records import Message, ToolCall, Trajectory, iter_json_objects, read_jsonl
from agentrag.runs import replace_if_changed

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "Answer the question using the search tool to look up facts in the knowledge base. Search "
    "as often as needed, then give a short final answer."
)

TRL_FILE = "trl_sft.jsonl"
SHAREGPT_FILE = "sharegpt.jsonl"
DATASET_INFO_FILE = "dataset_info.json"
SHAREGPT_DATASET = "agentrag_sft"
#: the sharegpt tags of our LLaMA-Factory exports (``dataset_info.json`` ``tags``)
SHAREGPT_TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "observation_tag": "observation", "function_tag": "function_call"}


def default_tools() -> list[dict[str, Any]]:
    """The tool list the agents use: the dense retrieval tool schema."""
    from agentrag.agents.tools import search_tool_schema

    return [search_tool_schema()]


def _system_of(traj: Trajectory, system_prompt: str | None) -> str:
    if system_prompt is not None:
        return system_prompt
    if traj.messages and traj.messages[0].role == "system" and traj.messages[0].content:
        return traj.messages[0].content
    return DEFAULT_SYSTEM_PROMPT


def trajectory_messages(traj: Trajectory, system_prompt: str | None = None,
                        tools: Sequence[dict[str, Any]] | None = None, *, reasoning: bool = False) -> list[Message]:
    """The trajectory as chat messages for training.

    The agents' canonical view (:func:`agentrag.agents.trajectory_to_messages`: system, user, then
    per step an assistant message with the thought and its tool call followed by the ``role: tool``
    observation; the final answer is the last assistant message), made trainable: a tool call
    whose step has no observation is answered by a tool message with the step's error, and a
    trajectory whose messages do not end on a plain assistant turn gets one with its answer.
    """
    from agentrag.agents import trajectory_to_messages

    msgs = list(trajectory_to_messages(traj, _system_of(traj, system_prompt), tools, reasoning=reasoning))
    errors = {(s.action.id or f"call_{i}"): (s.error or "") for i, s in enumerate(traj.steps) if s.action}
    out: list[Message] = []
    for k, m in enumerate(msgs):
        out.append(m)
        if m.role != "assistant" or not m.tool_calls:
            continue
        answered = {n.tool_call_id for n in msgs[k + 1:k + 1 + len(m.tool_calls)] if n.role == "tool"}
        for tc in m.tool_calls:
            if tc.id not in answered:
                out.append(Message(role="tool", tool_call_id=tc.id, name=tc.name, content=errors.get(tc.id, "")))
    last = out[-1]
    if (last.role != "assistant" or last.tool_calls or not (last.content or "").strip()) and traj.answer:
        out.append(Message(role="assistant", content=traj.answer))
    return out


def _call_dict(tc: ToolCall) -> dict[str, Any]:
    # arguments stay a JSON object: chat templates render them with `tojson`
    return {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": dict(tc.arguments)}}


def message_dict(msg: Message) -> dict[str, Any]:
    """A message in TRL's conversational form (tool-call arguments as a JSON object, not a string)."""
    out: dict[str, Any] = {"role": msg.role, "content": msg.content if msg.content is not None else ""}
    if msg.tool_calls:
        out["tool_calls"] = [_call_dict(tc) for tc in msg.tool_calls]
    if msg.role == "tool":
        out["tool_call_id"] = msg.tool_call_id or ""
        if msg.name:
            out["name"] = msg.name
    return out


def _answered(t: Trajectory) -> bool:
    return t.finish_reason == "answered" and bool((t.answer or "").strip())


def _exportable_stream(trajs: Iterable[Trajectory], only_answered: bool) -> Iterator[Trajectory]:
    skipped = 0
    for t in trajs:
        if only_answered and not _answered(t):
            skipped += 1
            continue
        yield t
    if skipped:
        log.info("skipped %d trajectories that did not end with an answer", skipped)


def _exportable(trajs: Iterable[Trajectory], only_answered: bool) -> list[Trajectory]:
    return list(_exportable_stream(trajs, only_answered))


def training_chats(traj: Trajectory, system_prompt: str | None = None,
                   tools: Sequence[dict[str, Any]] | None = None, *,
                   reasoning: bool = False) -> list[tuple[list[Message], list[dict[str, Any]]]]:
    """The chats ``traj`` is trained as, each with its tool list: the function-calling agents'
    one chat with ``tools`` (default: the tools the agent offered the model, ``metadata["tools"]``,
    else the search tool): the conversation react and plan_step recorded
    (:mod:`agentrag.export.recorded`), else the canonical view (:func:`trajectory_messages`); the
    text-protocol agents' chats as they sent them (:mod:`agentrag.export.protocol`), with
    ``tools`` only when given (they use none)."""
    from agentrag.export.protocol import protocol_chats
    from agentrag.export.recorded import RECORDED_AGENTS, recorded_chat

    chats = protocol_chats(traj, system_prompt)
    if chats is not None:
        return [(c, list(tools) if tools is not None else []) for c in chats]
    offered = traj.metadata.get("tools")
    tool_list = (list(tools) if tools is not None else list(offered) if isinstance(offered, list) and offered
                 else default_tools())
    recorded = recorded_chat(traj, system_prompt, reasoning=reasoning) if traj.agent in RECORDED_AGENTS else None
    if recorded is not None:
        return [(recorded, tool_list)]
    return [(trajectory_messages(traj, system_prompt, tool_list, reasoning=reasoning), tool_list)]


def to_trl_records(trajs: Iterable[Trajectory], system_prompt: str | None = None,
                   tools: Sequence[dict[str, Any]] | None = None, *,
                   only_answered: bool = True, reasoning: bool = False) -> list[dict[str, Any]]:
    """TRL conversational records ``{"messages": [...], "tools": [...]}``, one per training chat
    of each trajectory (:func:`training_chats`); with ``reasoning`` each assistant turn starts
    with its step's ``<think>`` reasoning."""
    tool_list = list(tools) if tools is not None else None
    return [{"messages": [message_dict(m) for m in chat], "tools": chat_tools}
            for t in _exportable(trajs, only_answered)
            for chat, chat_tools in training_chats(t, system_prompt, tool_list, reasoning=reasoning)]


def _function_of(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") if tool.get("type") == "function" else tool
    if not isinstance(fn, dict) or "name" not in fn:
        raise UserError(f"tool schema {tool!r} has no function name; expected OpenAI's "
                        "{'type': 'function', 'function': {'name', 'description', 'parameters'}}")
    return fn


def sharegpt_tools(tools: Sequence[dict[str, Any]]) -> str:
    """The sharegpt ``tools`` column: a JSON string of the function schemas."""
    return json.dumps([_function_of(t) for t in tools], ensure_ascii=False)


def to_sharegpt(trajs: Iterable[Trajectory], system_prompt: str | None = None,
                tools: Sequence[dict[str, Any]] | None = None, *,
                only_answered: bool = True, reasoning: bool = False) -> list[dict[str, Any]]:
    """LLaMA-Factory sharegpt records: ``conversations`` (human/function_call/observation/gpt),
    ``system`` and ``tools`` (a JSON string of function schemas).

    A function_call turn holds the thought and the call (:func:`function_call_value`).
    """
    tool_list = list(tools) if tools is not None else None
    out = []
    for t in _exportable(trajs, only_answered):
        for msgs, chat_tools in training_chats(t, system_prompt, tool_list, reasoning=reasoning):
            system = (msgs[0].content or "") if msgs and msgs[0].role == "system" else ""
            out.append({"conversations": sharegpt_turns(msgs), "system": system,
                        "tools": sharegpt_tools(chat_tools) if chat_tools else ""})
    return out


def sharegpt_turns(msgs: Sequence[Message]) -> list[dict[str, str]]:
    """Chat messages as sharegpt turns: ``human``, ``function_call`` (an assistant turn with tool
    calls, :func:`function_call_value`), ``observation`` (the tool results; those of parallel calls
    joined into one turn) and ``gpt``; system messages are left out (sharegpt keeps them apart).
    A user turn right after tool results (plan_step's step prompt, react's forced-answer
    instruction) joins their observation turn after a blank line: LLaMA-Factory reads sharegpt
    turns as alternating human/observation and gpt/function_call, and drops a record with two
    of the first kind in a row."""
    conv: list[dict[str, str]] = []
    for m in msgs:
        if m.role == "system":
            continue
        if m.role == "user":
            if conv and conv[-1]["from"] == "observation":
                conv[-1]["value"] += "\n\n" + (m.content or "")
            else:
                conv.append({"from": "human", "value": m.content or ""})
        elif m.role == "tool":
            if conv and conv[-1]["from"] == "observation":  # parallel calls: one observation turn
                conv[-1]["value"] += "\n" + (m.content or "")
            else:
                conv.append({"from": "observation", "value": m.content or ""})
        else:
            conv.append(sharegpt_turn(m))
    return conv


def sharegpt_turn(m: Message) -> dict[str, str]:
    """An assistant message as one sharegpt turn: ``function_call`` when it calls tools, else ``gpt``."""
    if m.tool_calls:
        return {"from": "function_call", "value": function_call_value(m)}
    return {"from": "gpt", "value": m.content or ""}


def function_call_value(m: Message) -> str:
    """A sharegpt ``function_call`` turn: the call JSON (a list for parallel calls); when the
    assistant wrote a thought before the call, ``thought\n<tool_call>{json}</tool_call>`` (one block
    per call), the form LLaMA-Factory's tool formatter accepts, so the thought is trained too."""
    calls = [{"name": tc.name, "arguments": tc.arguments} for tc in m.tool_calls]
    thought = (m.content or "").strip()
    if not thought:
        return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
    blocks = "\n".join(f"<tool_call>{json.dumps(c, ensure_ascii=False)}</tool_call>" for c in calls)
    return f"{thought}\n{blocks}"


def sharegpt_dataset_info(file_name: str = SHAREGPT_FILE, name: str = SHAREGPT_DATASET) -> dict[str, Any]:
    """LLaMA-Factory's ``dataset_info.json`` entry for the sharegpt export."""
    return {name: {
        "file_name": file_name,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
        "tags": dict(SHAREGPT_TAGS),
    }}



def write_jsonl_dicts(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write plain dicts as JSONL atomically; returns the row count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    try:
        with writing(path, tmp), tmp.open("w", encoding="utf-8") as fh:
            for row in rows:  # rows may be a stream that raises (a bad record): no tmp file stays
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with writing(path, tmp):
        replace_if_changed(tmp, path)  # a rerun that exports the same rows leaves the file untouched
    return n


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with writing(path, tmp):
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        replace_if_changed(tmp, path)


def write_sft_export(out_dir: str | os.PathLike[str], trajs: Iterable[Trajectory],
                     system_prompt: str | None = None, tools: Sequence[dict[str, Any]] | None = None, *,
                     only_answered: bool = True, reasoning: bool = False,
                     license: str | None = None) -> dict[str, Any]:
    """Write ``trl_sft.jsonl``, ``sharegpt.jsonl`` and ``dataset_info.json`` into ``out_dir``.

    Returns a summary: counts and the paths written. ``trajs`` that is not an iterator (a list, a
    run's :class:`~agentrag.runs.JsonlStore`) is read once per file, trajectory by trajectory; a
    one-shot iterator is read into a list first.
    """
    out = check_out_dir(out_dir)
    source = list(trajs) if iter(trajs) is trajs else trajs
    tool_list = list(tools) if tools is not None else None
    total = used = 0

    def counted() -> Iterable[Trajectory]:
        nonlocal total, used
        for t in source:
            total += 1
            if not only_answered or _answered(t):
                used += 1
                yield t

    n_trl = write_jsonl_dicts(out / TRL_FILE, (r for t in counted()
                                               for r in to_trl_records([t], system_prompt, tool_list,
                                                                       only_answered=False, reasoning=reasoning)))
    if total - used:
        log.info("skipped %d trajectories that did not end with an answer", total - used)
    write_jsonl_dicts(out / SHAREGPT_FILE, (r for t in source if not only_answered or _answered(t)
                                            for r in to_sharegpt([t], system_prompt, tool_list, only_answered=False,
                                                                 reasoning=reasoning)))
    write_json(out / DATASET_INFO_FILE, sharegpt_dataset_info())
    # "exported" counts records (a reason_ground trajectory gives one per round), "skipped" trajectories
    summary: dict[str, Any] = {"trajectories": total, "exported": n_trl, "skipped": total - used}
    card = write_card(out, "sft", TRL_FILE, summary,
                      "Search-agent trajectories as TRL conversational records (`messages` with assistant "
                      "`tool_calls` and `role: tool` observations, plus `tools`); `sharegpt.jsonl` and "
                      "`dataset_info.json` hold the same data for LLaMA-Factory.", license=license)
    summary["files"] = [str(out / TRL_FILE), str(out / SHAREGPT_FILE), str(out / DATASET_INFO_FILE), str(card)]
    return summary


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Read a trajectories JSONL file; a malformed line raises UserError naming file:line and field."""
    return list(read_jsonl(path, Trajectory))


def record_tools(obj: dict[str, Any], path: str | os.PathLike[str], lineno: int) -> list[Any] | None:
    """The ``tools`` field of an exported record: a list of schemas, or a JSON string of one."""
    tools = obj.get("tools")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}: field 'tools' is a string but not JSON: {exc.msg}") from exc
    if tools is not None and not isinstance(tools, list):
        raise UserError(f"{path}:{lineno}: field 'tools' must be a list of tool schemas")
    return tools


def read_trl_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a TRL SFT JSONL file, checking each record's shape (UserError with file:line and field)."""
    rows = []
    for lineno, obj in iter_json_objects(path):
        msgs = obj.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise UserError(f"{path}:{lineno}: field 'messages' must be a non-empty list of chat messages")
        for j, m in enumerate(msgs):
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
                raise UserError(f"{path}:{lineno}: field 'messages.{j}.role' must be one of "
                                "system/user/assistant/tool")
        if not any(m["role"] == "assistant" for m in msgs):
            raise UserError(f"{path}:{lineno}: field 'messages' has no assistant turn to train on")
        rows.append({"messages": msgs, "tools": record_tools(obj, path, lineno)})
    if not rows:
        raise UserError(f"{path}: no records; export some with `agentrag export sft`")
    return rows


__all__ = ["DEFAULT_SYSTEM_PROMPT", "default_tools", "trajectory_messages", "training_chats", "message_dict", "to_trl_records",
           "to_sharegpt", "sharegpt_turns", "sharegpt_turn", "sharegpt_tools", "function_call_value",
           "sharegpt_dataset_info", "SHAREGPT_TAGS", "write_sft_export", "read_trajectories",
           "read_trl_records", "record_tools"]
