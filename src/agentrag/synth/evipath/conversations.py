"""Eq. 7 training conversations (§4.3): the planner's multi-turn chat and one single-turn chat per
executor call, with the agent's prompts I_p and I_e (so the data trains the protocol the
``planner_executor`` agent runs)."""

from __future__ import annotations

from agentrag.agents.pe_protocol import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    executor_user,
    render_executor_turn,
    render_observation,
    render_planner_turn,
)
from agentrag.records import Message
from agentrag.synth.evipath.schema import EviItem, IterationRecord, PlanRecord, SelectionRecord


def planner_messages(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord]) -> list[Message]:
    """system I_p, user q; then per iteration assistant ``<think>`` + ``<action>`` and user
    observation (the executor's answer sentences); finally assistant ``<think>`` + ``<answer>``.
    The plan P (Eq. 3) opens the first thought, as the first thing the planner writes."""
    msgs = [Message(role="system", content=PLANNER_SYSTEM), Message(role="user", content=f"Question: {item.question}")]
    for k, it in enumerate(iterations):
        thought = it.thought
        if k == 0 and plan.plan:
            steps = "\n".join(f"{i}. {q}" for i, q in enumerate(plan.plan, start=1))
            thought = f"To answer this, I plan to:\n{steps}\n{thought}"
        if it.actions:
            msgs.append(Message(role="assistant", content=render_planner_turn(thought, searches=it.actions)))
            msgs.append(Message(role="user", content=render_observation(it.observations)))
        else:
            msgs.append(Message(role="assistant", content=render_planner_turn(thought, answer=it.answer or "")))
    return msgs


def executor_messages(sel: SelectionRecord) -> list[Message]:
    """system I_e, user (q_i + indexed noisy F), assistant think/select/answer(a_i)."""
    return [Message(role="system", content=EXECUTOR_SYSTEM),
            Message(role="user", content=executor_user(sel.question, sel.evidence)),
            Message(role="assistant", content=render_executor_turn(sel.thought, sel.select or [], sel.answer))]


__all__ = ["planner_messages", "executor_messages"]
