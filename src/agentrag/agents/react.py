"""``react``: function calling with one dense-search tool; the answer inside <answer> tags.

Each turn the model either calls the search tool (one call per turn; extra parallel calls are
dropped and noted in ``Step.error``) or answers. Malformed turns (unparseable output, a tool
call with bad JSON or bad arguments, an unknown tool, an empty reply, and, with
``untagged_answer="reject"``, text without answer tags) are fed back to the model as an error
observation and count toward ``max_steps``; ``max_format_errors`` of them in a row end the run
with ``parse_error``. ``<answer></answer>`` with nothing inside ends it with ``no_answer``, and so
does (by default, ``untagged_answer="no_answer"``) a text reply with neither a tool call nor
answer tags. A malformed answer (:mod:`agentrag.protocol`: an unclosed, mis-cased or nested
``<answer>``, a second one after the first) is never an answer: it is fed back as a format error; the prediction only ever comes from the answer tags (or a JSON ``{"answer": ...}``
reply), never from free text, which may be a document the model copied back (documents reach
the model with protocol tags escaped). With ``force_answer`` (the default) the last of the
``max_steps`` turns offers no tools and asks for the answer; no answer there ends the run with
``max_steps``.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from agentrag.agents.base import ToolResult
from agentrag.agents.config import ReactConfig
from agentrag.agents.loop import BaseAgent, strip_tool_call_text
from agentrag.agents.messages import step_to_messages
from agentrag.agents.prompts import EMPTY_REPLY, REACT_FORCE_ANSWER, REACT_NO_TAGS, REACT_SYSTEM
from agentrag.agents.tools import json_answer, tool_calls_from_text
from agentrag.errors import ParseError
from agentrag.llm.structured import parse_structured, response_format
from agentrag.protocol import parse_turn
from agentrag.records import Message, QAItem, Step, Trajectory


def react_system_prompt(tool_name: str = "dense_search") -> str:
    """The react system prompt for a search tool called ``tool_name``."""
    return REACT_SYSTEM.format(tool=tool_name)


class FinalAnswer(BaseModel):
    """The final short answer."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(max_length=100, description="the short answer")


#: response_format of the forced answer turn with ``forced_answer_format="json"``
ANSWER_FORMAT = response_format(FinalAnswer, "final_answer")


class ReactAgent(BaseAgent):
    """RAGShaper-style function-calling agent (Eq. 1 trajectories)."""

    name = "react"
    config_class = ReactConfig
    config: ReactConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(cfg.tool_name, traj=traj, neutralize=True)
        system = cfg.system_prompt.format(tool=tool.name) if cfg.system_prompt else react_system_prompt(tool.name)
        messages = [Message(role="system", content=system),
                    Message(role="user", content=item.question)]
        traj.messages = messages
        traj.metadata["tools"] = [tool.schema]  # what the model was offered (the SFT export lists it)
        errors_in_a_row = 0
        for turn_index in range(cfg.max_steps):
            if cfg.force_answer and cfg.max_steps >= 2 and turn_index == cfg.max_steps - 1:
                self._forced_answer(traj, messages)
                return
            turn = self.chat(messages, tools=[tool.schema])
            text = turn.text
            calls = list(turn.completion.tool_calls) if turn.completion else []
            text_error = None
            if not calls and turn.error is None:
                calls, text_error = tool_calls_from_text(text)
            if turn.error is not None:
                step = self.step(turn, error=turn.error, observation=f"Error: {turn.error}. {EMPTY_REPLY}")
            elif calls:
                call = calls[0] if calls[0].id else calls[0].model_copy(update={"id": f"call_{len(traj.steps)}"})
                t0 = time.perf_counter()
                if call.name == tool.name:
                    result = tool(call.arguments)
                else:
                    msg = f"unknown tool {call.name!r}; the only tool is {tool.name!r}"
                    result = ToolResult(observation=f"Error: {msg}", error=msg)
                error = result.error
                if len(calls) > 1:
                    note = f"{len(calls) - 1} extra tool call(s) ignored: one call per turn"
                    error = f"{error}; {note}" if error else note
                step = self.step(turn, thought=strip_tool_call_text(text), action=call,
                                 observation=result.observation, hits=result.hits, error=error)
                step.latency += time.perf_counter() - t0
            elif text_error is not None:
                step = self.step(turn, error=text_error,
                                 observation=f"Error: {text_error}. Call the tool with valid JSON arguments.")
            else:
                answer, why = _explicit_answer(text)
                if answer is not None:
                    self._finish(traj, messages, self.step(turn), answer)
                    return
                if why is None and text.strip() and cfg.untagged_answer == "no_answer":
                    self._finish(traj, messages, self.step(turn, error="no tool call and no <answer> tags"), "")
                    return
                # a malformed answer is never an answer: the model is told and tries again
                error = (f"malformed turn: {why}" if why else
                         "no tool call and no <answer> tags" if text.strip() else "empty reply")
                feedback = REACT_NO_TAGS.format(tool=tool.name) if text.strip() else EMPTY_REPLY
                step = self.step(turn, error=error, observation=f"Error: {error}. {feedback}" if why else feedback)
            traj.steps.append(step)
            messages.extend(step_to_messages(step, len(traj.steps) - 1))
            malformed = step.error is not None and not step.hits and not _retrieval_failure(step)
            errors_in_a_row = errors_in_a_row + 1 if malformed else 0
            if errors_in_a_row >= cfg.max_format_errors:
                traj.finish_reason = "parse_error"
                return
        traj.finish_reason = "max_steps"

    def _forced_answer(self, traj: Trajectory, messages: list[Message]) -> None:
        """The last turn: no tools offered, the model is told to answer now."""
        messages.append(Message(role="user", content=REACT_FORCE_ANSWER))
        if self.config.forced_answer_format == "json":
            turn = self.chat(messages, response_format=ANSWER_FORMAT)
        else:
            turn = self.chat(messages)
        text = turn.text
        invalid = None
        if turn.error is not None:
            answer = None
        elif self.config.forced_answer_format == "json":
            answer, invalid = _json_answer(text)
        else:
            answer, malformed = _explicit_answer(text)
            invalid = f"malformed turn: {malformed}" if malformed else None
        if answer is not None:
            self._finish(traj, messages, self.step(turn), answer)
            return
        error = turn.error or invalid or "no answer in the final (forced) turn"
        step = self.step(turn, error=error)
        traj.steps.append(step)
        messages.extend(step_to_messages(step, len(traj.steps) - 1))
        traj.finish_reason = "max_steps"

    @staticmethod
    def _finish(traj: Trajectory, messages: list[Message], step: Step, answer: str) -> None:
        traj.steps.append(step)
        messages.extend(step_to_messages(step, len(traj.steps) - 1))
        traj.answer = answer or None
        traj.finish_reason = "answered" if answer else "no_answer"


def _explicit_answer(text: str) -> tuple[str | None, str | None]:
    """``(answer, None)``: the answer inside <answer> tags (the one protocol parser: the first
    closed one; text after it is not part of the turn), or of a JSON ``{"answer": ...}`` reply;
    ``(None, reason)`` for a malformed turn (an unclosed, mis-cased or nested tag, a second answer);
    ``(None, None)`` when there is neither."""
    turn = parse_turn(text, actions=("answer",))
    if turn.malformed is not None:
        return None, turn.malformed
    if turn.action == "answer":
        return turn.content, None
    return json_answer(text), None


def _json_answer(text: str) -> tuple[str | None, str | None]:
    """(answer, None) from <answer> tags or a valid :class:`FinalAnswer` reply; else (None, why)."""
    turn = parse_turn(text, actions=("answer",))
    if turn.malformed is not None:
        return None, f"malformed turn: {turn.malformed}"
    if turn.action == "answer":
        return turn.content, None
    try:
        return parse_structured(text, FinalAnswer).answer.strip(), None
    except ParseError as exc:
        return None, f"invalid final answer: {exc}"


def _retrieval_failure(step: Step) -> bool:
    return step.error is not None and step.error.startswith("the search failed")


__all__ = ["ReactAgent", "react_system_prompt", "FinalAnswer", "ANSWER_FORMAT"]
