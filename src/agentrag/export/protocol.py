"""SFT chats of the text-protocol agents (``search_r1``, ``reason_ground``, ``planner_executor``;
the baselines' are in :mod:`agentrag.export.pipelines`) in the form each agent sent them: its own prompts and turn format, no tool schema and no ``<tool_call>`` the agent never
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
- ``planner_executor``: the planner's chat as the agent recorded it (``Trajectory.messages``:
  the planner prompt I_p, ``Question: q``, then each planner turn as the model wrote it and the
  user turn the agent answered it with: the executor's answer sentences as ``Observation:``, the
  format reminder, the answer-now instruction appended to the last one), ending at the planner's
  last turn; then one chat per executor call whose output parsed (EviPath trains both roles,
  Eq. 7): the prompt I_e, the sub-question with the indexed evidence the executor saw (the
  step's hits, cut at the agent's ``max_passage_chars`` when it had one), and the executor's
  output (the step's ``raw``). A trajectory that recorded no planner turn (not run by the
  agent) gives the executor chats only.
"""

from __future__ import annotations

import logging
from typing import Literal

from agentrag.records import Message, Trajectory

log = logging.getLogger(__name__)

#: agents whose trajectories are exported by this module
TEXT_PROTOCOL_AGENTS = ("search_r1", "reason_ground", "planner_executor")


def protocol_chats(traj: Trajectory, system_prompt: str | None = None) -> list[list[Message]] | None:
    """The training chats of ``traj`` when its agent speaks a text protocol (module docstring) or
    is a baseline, else None. ``system_prompt`` (given by the user) replaces the agent's own
    system message (reason_ground, the baselines; the planner's for planner_executor) or is put
    before the prompt (search_r1, which has none)."""
    if traj.agent == "search_r1":
        return [search_r1_chat(traj, system_prompt)]
    if traj.agent == "reason_ground":
        return reason_ground_chats(traj, system_prompt)
    if traj.agent == "planner_executor":
        return planner_executor_chats(traj, system_prompt)
    from agentrag.export.pipelines import PIPELINE_AGENTS, pipeline_chats

    if traj.agent in PIPELINE_AGENTS:
        return [_with_system(c, system_prompt) for c in pipeline_chats(traj)]
    return None


def _with_system(chat: list[Message], system_prompt: str | None) -> list[Message]:
    if system_prompt is None or not chat or chat[0].role != "system":
        return chat
    return [Message(role="system", content=system_prompt), *chat[1:]]


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


def planner_chat(traj: Trajectory, system_prompt: str | None = None) -> list[Message] | None:
    """The planner's chat of a planner_executor trajectory (module docstring); None when the
    trajectory recorded no planner turn."""
    msgs = traj.messages
    last = max((i for i, m in enumerate(msgs) if m.role == "assistant"), default=None)
    if last is None or len(msgs) < 3 or msgs[0].role != "system" or msgs[1].role != "user":
        return None
    head = [Message(role="system", content=system_prompt)] if system_prompt is not None else [msgs[0]]
    return head + list(msgs[1:last + 1])


def executor_chats(traj: Trajectory) -> list[list[Message]]:
    """One chat per executor call of a planner_executor trajectory whose output parsed (module
    docstring), in step order."""
    from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, executor_user
    from agentrag.agents.planner_executor import SEARCH, passage_text

    max_chars = traj.metadata.get("max_passage_chars")
    max_chars = max_chars if isinstance(max_chars, int) else None
    chats = []
    for step in traj.steps:
        if step.action is None or step.action.name != SEARCH or step.raw is None or step.error or not step.hits:
            continue
        question = str(step.action.arguments.get("query", ""))
        evidence = [passage_text(h, max_chars) for h in step.hits]
        chats.append([Message(role="system", content=EXECUTOR_SYSTEM),
                      Message(role="user", content=executor_user(question, evidence)),
                      Message(role="assistant", content=step.raw)])
    return chats


def planner_executor_chats(traj: Trajectory, system_prompt: str | None = None) -> list[list[Message]]:
    """The planner's chat, then the executor's chats (module docstring)."""
    planner = planner_chat(traj, system_prompt)
    if planner is None:
        log.warning("trajectory %s: no planner turn recorded; only its executor calls are exported", traj.id)
    return ([planner] if planner is not None else []) + executor_chats(traj)


__all__ = ["TEXT_PROTOCOL_AGENTS", "protocol_chats", "search_r1_chat", "search_r1_segments", "reason_ground_chats",
           "planner_chat", "executor_chats", "planner_executor_chats"]
