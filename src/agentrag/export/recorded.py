"""SFT chats of the function-calling agents (``react``, ``plan_step``) as the agent sent them.

``Trajectory.messages`` keeps the exact conversation an agent had, protocol turns included:
plan_step's plan request (``PLAN_USER``) and the step prompt (``STEP_USER``) before every step,
react's error feedback and its forced-answer instruction. Those turns are not steps, so the
canonical view rebuilt from the steps (:func:`agentrag.export.sft.trajectory_messages`) misses
them; the export uses the recorded conversation instead, made trainable:

- it is used only when it holds the whole trajectory: system prompt, user turn, then assistant
  turns whose thoughts and tool calls are the steps' (in order: a reply with several calls covers
  one step per call) and tool messages whose contents are the steps' observations. A conversation
  that holds only the prompt (a trajectory written by a synthesizer rather than run) or that
  disagrees with the steps (steps edited after the run) gives ``None``: the caller falls back to
  the canonical view;
- it ends at the model's last turn (a trailing prompt or observation the model never answered is
  not trained on); a run that ended with a ``Final_Answer`` call ends on that call, the turn the
  model wrote, not on an answer turn it never wrote;
- ``system_prompt`` (given by the user) replaces the recorded system message, and with
  ``reasoning`` each assistant turn starts with the reasoning of the step it opens.
"""

from __future__ import annotations

import logging

from agentrag.agents.messages import with_reasoning
from agentrag.records import Message, Step, Trajectory

log = logging.getLogger(__name__)

#: agents whose recorded conversation is exported by this module
RECORDED_AGENTS = ("react", "plan_step")


def _same_call(step: Step, message_call: object) -> bool:
    action = step.action
    return (action is not None and action.name == getattr(message_call, "name", None)
            and action.arguments == getattr(message_call, "arguments", None))


def align_turns(traj: Trajectory) -> dict[int, int] | None:
    """For each assistant message of ``traj.messages`` (by index) the step its turn opens; ``None``
    when the conversation does not hold the trajectory's steps (module docstring)."""
    msgs, steps = traj.messages, traj.steps
    if len(msgs) < 3 or msgs[0].role != "system" or msgs[1].role != "user":
        return None
    starts: dict[int, int] = {}
    s = 0
    open_calls: list[int] = []  # the steps whose tool results are still to come
    for i, m in enumerate(msgs[2:], start=2):
        if m.role == "assistant":
            if s >= len(steps) or (m.content or "") != steps[s].thought:
                return None
            starts[i] = s
            if not m.tool_calls:
                if steps[s].action is not None:
                    return None
                s, open_calls = s + 1, []
                continue
            for j, call in enumerate(m.tool_calls):  # calls past the last step were never run
                if s + j < len(steps) and not _same_call(steps[s + j], call):
                    return None
            open_calls = list(range(s, min(s + len(m.tool_calls), len(steps))))
            s += len(m.tool_calls)
        elif m.role == "tool":
            if not open_calls or (m.content or "") != (steps[open_calls[0]].observation or ""):
                return None
            open_calls.pop(0)
        elif m.role == "system":
            return None
    if not starts or s < len(steps):
        return None
    return starts


def recorded_chat(traj: Trajectory, system_prompt: str | None = None, *,
                  reasoning: bool = False) -> list[Message] | None:
    """The chat ``traj``'s agent had, made trainable (module docstring); ``None`` when
    ``traj.messages`` does not hold it."""
    starts = align_turns(traj)
    if starts is None:
        if any(m.role == "assistant" for m in traj.messages):
            log.warning("trajectory %s: its recorded conversation does not match its steps; exported from "
                        "the steps", traj.id)
        return None
    last = max(starts)
    out: list[Message] = []
    for i, m in enumerate(traj.messages[:last + 1]):
        if i == 0 and system_prompt is not None:
            m = Message(role="system", content=system_prompt)
        elif i in starts and reasoning and traj.steps[starts[i]].reasoning:
            m = m.model_copy(update={"content": with_reasoning(m.content, traj.steps[starts[i]].reasoning)})
        out.append(m)
    return out


__all__ = ["RECORDED_AGENTS", "align_turns", "recorded_chat"]
