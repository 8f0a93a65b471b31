"""SFT chats of the text-protocol agents (``search_r1``, ``reason_ground``) in the form each agent
sent them: its own prompts and turn format, no tool schema and no ``<tool_call>`` the agent never
wrote (the generic export in :mod:`agentrag.export.sft` is for the function-calling agents).

- ``search_r1``: one chat per trajectory: the agent's user prompt, then its stream cut into the
  generated segments (``assistant``) and the text the agent inserted between them (``user``: the
  ``<information>...</information>`` blocks and the invalid-action note), so the inserted text
  is masked from the loss like any prompt. The contents after the prompt, concatenated, are the
  agent's stream byte for byte; each request the agent made is the prompt plus a prefix of it.
- ``reason_ground``: one chat per round that gave a usable step (ReasonRAG trains per step): the
  round's request, built by the agent's own :func:`~agentrag.agents.reason_ground.stage_messages`
  from the trajectory (the Reasoning or Grounding system prompt and user template, the history
  y<i, the latest query and its documents, the forced-answer instruction in the forced round),
  then the step y_i as the assistant turn. Rounds whose output had no usable tag are in later
  requests' history (as the agent sent them) but are not trained on.
"""

from __future__ import annotations

import logging
from typing import Literal

from agentrag.records import Message, Trajectory

log = logging.getLogger(__name__)

#: agents whose trajectories are exported by this module
TEXT_PROTOCOL_AGENTS = ("search_r1", "reason_ground")


def protocol_chats(traj: Trajectory, system_prompt: str | None = None) -> list[list[Message]] | None:
    """The training chats of ``traj`` when its agent speaks a text protocol (module docstring),
    else None. ``system_prompt`` (given by the user) replaces the agent's own system message
    (reason_ground) or is put before the prompt (search_r1, which has none)."""
    if traj.agent == "search_r1":
        return [search_r1_chat(traj, system_prompt)]
    if traj.agent == "reason_ground":
        return reason_ground_chats(traj, system_prompt)
    return None


def search_r1_segments(traj: Trajectory) -> list[tuple[Literal["assistant", "user"], str]] | None:
    """``traj``'s stream as ``(role, text)`` segments: ``assistant`` for what the model generated,
    ``user`` for what the agent inserted; None when they do not add up to the recorded stream."""
    from agentrag.agents.search_r1 import information_block

    out: list[tuple[Literal["assistant", "user"], str]] = []
    for step in traj.steps:
        if step.thought:
            out.append(("assistant", step.thought))
        if step.action is not None:
            out.append(("user", information_block(step.observation or "")))
        elif step.observation is not None:
            out.append(("user", f"\n{step.observation}\n"))
    stream = traj.metadata.get("stream")
    if not isinstance(stream, str) or "".join(text for _, text in out) != stream:
        return None
    return out


def search_r1_chat(traj: Trajectory, system_prompt: str | None = None) -> list[Message]:
    """The one chat of a search_r1 trajectory (module docstring)."""
    prompt = next((m for m in traj.messages if m.role == "user"), None)
    head = [Message(role="system", content=system_prompt)] if system_prompt else []
    head.append(prompt if prompt is not None else Message(role="user", content=traj.question))
    segments = search_r1_segments(traj)
    if segments is None:  # a stream the steps do not rebuild: the agent's last request and reply as one turn
        log.warning("trajectory %s: its steps do not rebuild its stream; exported as one assistant turn", traj.id)
        last = next((m for m in reversed(traj.messages) if m.role == "assistant"), None)
        return head + ([last] if last is not None else [])
    merged: list[Message] = []
    for role, text in segments:
        if merged and merged[-1].role == role:
            merged[-1] = Message(role=role, content=(merged[-1].content or "") + text)
        else:
            merged.append(Message(role=role, content=text))
    while merged and merged[-1].role != "assistant":  # nothing inserted after the last generation is trained
        merged.pop()
    return head + merged


def reason_ground_chats(traj: Trajectory, system_prompt: str | None = None) -> list[list[Message]]:
    """One chat per usable round of a reason_ground trajectory (module docstring)."""
    from agentrag.agents.reason_ground import parse_action, stage_messages
    from agentrag.agents.tools import NO_DOCUMENTS

    forced_at = traj.metadata.get("forced_round")
    y: list[str] = []
    stage, query, documents = "reasoning", "", NO_DOCUMENTS
    chats: list[list[Message]] = []
    for i, step in enumerate(traj.steps):
        forced = i == forced_at
        request = stage_messages(traj.question, y, stage, query, documents, forced=forced)
        if step.raw is None:  # the model's output could not be read: nothing was appended to y
            continue
        y.append(step.thought)
        if step.action is not None:
            stage, query, documents = "grounding", str(step.action.arguments.get("query", "")), (
                step.observation if step.observation is not None else NO_DOCUMENTS)
        else:
            action, _ = parse_action(step.thought, stage, forced=forced)
            if action == "evidence":
                stage = "reasoning"
            elif action == "answer":
                stage = "terminal"
        if step.error is None:
            if system_prompt is not None and request and request[0].role == "system":
                request = [Message(role="system", content=system_prompt), *request[1:]]
            chats.append([*request, Message(role="assistant", content=step.thought)])
    return chats


__all__ = ["TEXT_PROTOCOL_AGENTS", "protocol_chats", "search_r1_chat", "search_r1_segments", "reason_ground_chats"]
