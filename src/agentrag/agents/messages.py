"""Trajectories as OpenAI chat messages and back (RAGShaper Eq. 1 <-> tool-calling chat).

The canonical view of a trajectory: ``system`` (the prompt), ``user`` (the question), then for
each step an ``assistant`` message (the thought as content, the action as its one tool call)
followed by a ``role: tool`` message with the observation; a step without an action whose
observation is set (feedback after malformed output) is followed by a ``user`` message
instead. The final answer is the last assistant message. Hits, usage, latency and step errors
are not part of the messages; ``Trajectory.messages`` keeps the exact conversation an agent
had, which for plan_step and search_r1 has extra protocol turns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentrag.agents.loop import extract_tag
from agentrag.errors import UserError
from agentrag.llm.parsing import split_think
from agentrag.records import FinishReason, Message, Step, ToolCall, Trajectory

ANSWER_TOOLS = ("Final_Answer",)


def _call_id(step: Step, index: int) -> str:
    return step.action.id if step.action is not None and step.action.id else f"call_{index}"


def with_reasoning(content: str | None, reasoning: str | None) -> str | None:
    """``content`` preceded by ``<think>`` reasoning ``</think>`` (the form reasoning models'
    chat templates, e.g. Qwen3, DeepSeek-R1, render); ``content`` itself when there is none."""
    if not reasoning:
        return content
    return f"<think>\n{reasoning}\n</think>\n\n{content or ''}"


def step_to_messages(step: Step, index: int, *, reasoning: bool = False) -> list[Message]:
    """The messages of step number ``index`` (0-based) in the canonical view; with ``reasoning``
    the step's reasoning precedes its thought in a ``<think>`` block (see :func:`with_reasoning`)."""
    thought = with_reasoning(step.thought, step.reasoning) if reasoning else step.thought
    if step.action is None:
        out = [Message(role="assistant", content=thought)]
        if step.observation is not None:
            out.append(Message(role="user", content=step.observation))
        return out
    call = step.action.model_copy(update={"id": _call_id(step, index)})
    out = [Message(role="assistant", content=thought or None, tool_calls=[call])]
    if step.observation is not None:
        out.append(Message(role="tool", content=step.observation, tool_call_id=call.id, name=call.name))
    return out


def trajectory_to_messages(traj: Trajectory, system_prompt: str | None = None,
                           tools: Sequence[dict[str, Any]] | None = None, *,
                           reasoning: bool = False) -> list[Message]:
    """The canonical chat view of ``traj`` (``tools`` is accepted for symmetry with the SFT
    exporters, which store the schemas next to the messages; it does not change the messages).
    A step's ``reasoning`` is left out unless ``reasoning`` is true."""
    out: list[Message] = []
    if system_prompt:
        out.append(Message(role="system", content=system_prompt))
    out.append(Message(role="user", content=traj.question))
    for i, step in enumerate(traj.steps):
        out.extend(step_to_messages(step, i, reasoning=reasoning))
    return out


def answer_of(step: Step) -> str | None:
    """The final answer a step gives: a Final_Answer call's argument, else the <answer> tag."""
    if step.action is not None:
        if step.action.name in ANSWER_TOOLS:
            value = step.action.arguments.get("answer")
            return str(value).strip() if value is not None else None
        return None
    return extract_tag(step.thought, "answer")


def messages_to_trajectory(messages: Sequence[Message | dict[str, Any]], *, id: str = "",
                           question: str | None = None, agent: str = "", model: str = "") -> Trajectory:
    """Parse chat messages (records or OpenAI dicts, tool arguments as JSON strings allowed) into
    a trajectory. Several tool calls in one assistant message become several steps, each matched
    with its ``role: tool`` reply by ``tool_call_id``."""
    msgs = [_as_message(m, i) for i, m in enumerate(messages)]
    users = [m for m in msgs if m.role == "user"]
    if question is None:
        if not users:
            raise UserError("messages_to_trajectory: no user message holds the question")
        question = users[0].content or ""
    steps: list[Step] = []
    pending: dict[str, Step] = {}
    seen_question = False
    for m in msgs:
        if m.role == "system":
            continue
        if m.role == "user" and not seen_question:
            seen_question = True
            continue
        if m.role == "assistant":
            pending = {}
            content, think = split_think(m.content)  # a reasoning model's <think> is not the thought
            if not m.tool_calls:
                steps.append(Step(thought=content or "", reasoning=think))
            for j, tc in enumerate(m.tool_calls):
                step = Step(thought=(content or "") if j == 0 else "", action=tc, reasoning=think if j == 0 else None)
                steps.append(step)
                pending[tc.id] = step
        elif m.role == "tool" and steps:
            target = pending.get(m.tool_call_id or "") or steps[-1]
            target.observation = m.content or ""
        elif m.role == "user" and steps and steps[-1].observation is None:
            steps[-1].observation = m.content or ""
    answer = answer_of(steps[-1]) if steps else None
    if steps and answer is None and steps[-1].action is None and steps[-1].observation is None:
        answer = steps[-1].thought.strip() or None
    finish: FinishReason = "answered" if answer else ("max_steps" if steps and steps[-1].action else "no_answer")
    return Trajectory(id=id, question=question, steps=steps, answer=answer, finish_reason=finish,
                      agent=agent, model=model, messages=msgs)


def _as_message(m: Message | dict[str, Any], index: int) -> Message:
    if isinstance(m, Message):
        return m
    if not isinstance(m, dict):
        raise UserError(f"message {index}: expected a dict or Message, got {type(m).__name__}")
    data = dict(m)
    calls = []
    for tc in data.pop("tool_calls", None) or []:
        fn = tc.get("function", tc)
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as exc:
                raise UserError(f"message {index}: tool call arguments are not valid JSON ({exc.msg})") from exc
        calls.append(ToolCall(id=tc.get("id", ""), name=fn.get("name", ""), arguments=args))
    try:
        return Message.model_validate({"role": data.get("role"), "content": data.get("content"),
                                       "tool_calls": calls, "tool_call_id": data.get("tool_call_id"),
                                       "name": data.get("name")})
    except ValueError as exc:
        raise UserError(f"message {index}: {exc}") from exc


__all__ = ["with_reasoning", "trajectory_to_messages", "messages_to_trajectory", "step_to_messages", "answer_of", "ANSWER_TOOLS"]
