"""``plan_step``: AgenticRAGTracer's plan-then-step protocol (§4).

Turn 0 writes a plan with no tools offered. Every later turn is asked to assess progress and take
exactly one step: ``RAG_search(query, topk)`` or ``Final_Answer(answer)`` (a text reply
``Final_Answer: X`` is accepted too). Limits: ``max_steps`` (10) RAG_search steps, a search call
beyond them ends the run with ``max_steps``; ``max_turns_without_tool`` (5) consecutive turns
without a tool call end it with ``parse_error``. Bad arguments and unknown tools come back as a
tool error observation; a turn without a tool call gets a reminder of the protocol.
"""

from __future__ import annotations

import re
import time
from typing import Any

from agentrag.agents.base import ToolResult
from agentrag.agents.config import PlanStepConfig
from agentrag.agents.loop import BaseAgent, strip_tool_call_text
from agentrag.agents.messages import step_to_messages
from agentrag.agents.prompts import PLAN_NO_TOOL, PLAN_SYSTEM, PLAN_USER, STEP_USER
from agentrag.agents.tools import QUERY_MAX_CHARS, tool_calls_from_text
from agentrag.records import Message, QAItem, Trajectory

RAG_SEARCH = "RAG_search"
FINAL_ANSWER = "Final_Answer"
_TEXT_ANSWER = re.compile(r"Final[_ ]Answer\s*[:：]\s*(.*)", re.IGNORECASE | re.DOTALL)


def plan_step_tools(max_k: int = 20) -> list[dict[str, Any]]:
    """The two function schemas of the protocol: RAG_search(query, topk) and Final_Answer(answer)."""
    return [
        {"type": "function", "function": {
            "name": RAG_SEARCH,
            "description": "Search the knowledge base; returns the topk documents closest in meaning to the query.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": "what to look for", "minLength": 1,
                          "maxLength": QUERY_MAX_CHARS},
                "topk": {"type": "integer", "description": "how many documents to return",
                         "minimum": 1, "maximum": max_k},
            }, "required": ["query"]},
        }},
        {"type": "function", "function": {
            "name": FINAL_ANSWER,
            "description": "Give the final short answer and stop.",
            "parameters": {"type": "object", "properties": {
                "answer": {"type": "string", "description": "the short answer", "maxLength": QUERY_MAX_CHARS},
            }, "required": ["answer"]},
        }},
    ]


class PlanStepAgent(BaseAgent):
    """Plan first, then one RAG_search per turn until Final_Answer."""

    name = "plan_step"
    config_class = PlanStepConfig
    config: PlanStepConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(RAG_SEARCH, k_arg="topk")
        tools = plan_step_tools(cfg.max_top_k)
        messages = [Message(role="system", content=PLAN_SYSTEM),
                    Message(role="user", content=PLAN_USER.format(question=item.question))]
        traj.messages = messages
        plan = self.chat(messages)
        traj.steps.append(self.step(plan, error=plan.error))
        traj.metadata["plan"] = plan.text
        messages.append(Message(role="assistant", content=plan.text))
        searches = 0
        without_tool = 0
        while True:
            messages.append(Message(role="user", content=STEP_USER))
            turn = self.chat(messages, tools=tools)
            text = turn.text
            calls = list(turn.completion.tool_calls) if turn.completion else []
            text_error = turn.error
            if not calls and text_error is None:
                calls, text_error = tool_calls_from_text(text)
            if calls:
                call = calls[0] if calls[0].id else calls[0].model_copy(update={"id": f"call_{len(traj.steps)}"})
                if call.name == FINAL_ANSWER:
                    answer = str(call.arguments.get("answer") or "").strip()
                    self._end(traj, messages, self.step(turn, thought=strip_tool_call_text(text), action=call),
                              answer)
                    return
                if call.name == RAG_SEARCH and searches >= cfg.max_steps:
                    traj.steps.append(self.step(turn, thought=strip_tool_call_text(text), action=call,
                                                error=f"tool step limit of {cfg.max_steps} reached"))
                    traj.finish_reason = "max_steps"
                    return
                t0 = time.perf_counter()
                if call.name == RAG_SEARCH:
                    searches += 1
                    without_tool = 0
                    result = tool(call.arguments)
                else:  # an unknown tool is no tool: it counts toward max_turns_without_tool
                    without_tool += 1
                    msg = f"unknown tool {call.name!r}; use {RAG_SEARCH} or {FINAL_ANSWER}"
                    result = ToolResult(observation=f"Error: {msg}", error=msg)
                step = self.step(turn, thought=strip_tool_call_text(text), action=call,
                                 observation=result.observation, hits=result.hits, error=result.error)
                step.latency += time.perf_counter() - t0
            else:
                m = _TEXT_ANSWER.search(text) if text_error is None else None
                if m is not None:
                    self._end(traj, messages, self.step(turn), m.group(1).strip())
                    return
                error = text_error or "no tool call"
                step = self.step(turn, error=error, observation=PLAN_NO_TOOL)
                without_tool += 1
            traj.steps.append(step)
            messages.extend(step_to_messages(step, len(traj.steps) - 1))
            if without_tool >= cfg.max_turns_without_tool:
                traj.finish_reason = "parse_error"
                return

    @staticmethod
    def _end(traj: Trajectory, messages: list[Message], step: Any, answer: str) -> None:
        traj.steps.append(step)
        messages.extend(step_to_messages(step, len(traj.steps) - 1))
        traj.answer = answer or None
        traj.finish_reason = "answered" if answer else "no_answer"


__all__ = ["PlanStepAgent", "plan_step_tools", "RAG_SEARCH", "FINAL_ANSWER"]
