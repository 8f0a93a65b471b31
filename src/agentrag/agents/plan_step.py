"""``plan_step``: AgenticRAGTracer's plan-then-step protocol (§4, Appendix B/D).

Turn 0 writes a plan with no tools offered. Every later turn gets the step prompt and takes one
step: ``RAG_search(query, topk)`` or ``Final_Answer(answer)``. A reply without a tool call is a
turn without a tool call: if its text says ``Final_Answer: X`` (as in the paper's transcripts)
the run ends with answer ``X`` (exactly the answer: see :func:`text_final_answer`; a marker not
followed by an answer, as in "Final Answer: is not known yet", is ignored), otherwise the next turn
re-asks with the step prompt alone (no extra instructions).
Only retrieval calls are steps: the run ends right after the ``max_steps``-th (10th) search, as
Tracer's evaluation does, with ``max_steps``; ``max_turns_without_tool`` (5) consecutive turns
without a valid tool call end it with ``parse_error``. Several tool calls in one reply are all
recorded and run in order (each search is a step). Bad arguments and unknown tools come back as
a tool error observation. ``traj.metadata["topk_per_step"]`` lists the top-k of each search.
Documents reach the model with ``<tool_call>`` tags and the ``Final_Answer:`` marker escaped
(:func:`~agentrag.agents.tools.neutralize_tags`), so a model that copies a document back neither
answers nor calls a tool with the document's words.
"""

from __future__ import annotations

import re
import time
from typing import Any

from agentrag.agents.base import ToolResult
from agentrag.agents.config import PlanStepConfig
from agentrag.agents.loop import BaseAgent, Turn, strip_tool_call_text
from agentrag.agents.messages import step_to_messages
from agentrag.agents.prompts import PLAN_SYSTEM, PLAN_USER, STEP_USER
from agentrag.agents.tools import QUERY_MAX_CHARS, tool_calls_from_text
from agentrag.records import Message, QAItem, Step, ToolCall, Trajectory, Usage

RAG_SEARCH = "RAG_search"
FINAL_ANSWER = "Final_Answer"
_TEXT_ANSWER = re.compile(r"Final[_ ]Answer\**\s*[:：]", re.IGNORECASE)
#: abbreviations whose period ends no sentence ("St. Louis", "Jr.", "Inc.")
_ABBREVIATIONS = frozenset("st mt ft dr mr mrs ms jr sr inc ltd co corp bros no vol vs etc gen col lt sgt capt "
                           "prof rev sen gov pres".split())
#: a word that opens an explanation after a comma, semicolon or spaced dash ("Paris, as Doc 2 says")
_EXPLANATION_WORDS = frozenset("according because as since this that it the based which from per see source "
                               "sources explanation reason note i we these those both".split())
#: lower-case words that show the text after a marker is not an answer ("Final Answer: is not known yet")
_NOT_AN_ANSWER = frozenset("is are was were will would should shall can could may might must has have had be "
                           "been being not pending once when after until to requires remains depends cannot "
                           "can't tbd follows goes".split())
_SEPARATOR = re.compile(r"\s*(?:[,;]|\s[-–—]|--)\s+(?=(\S+))")
_CONJUNCTION = re.compile(r"\s+(?:because|since|as per|according to|based on|as stated|as shown)\b.*$",
                          re.IGNORECASE)
_SENTENCE_PUNCT = re.compile(r"(\S+)([.!?])\s+(?=([A-Z(\"']\S*))")


def _is_abbreviation(token: str) -> bool:
    """``token`` (ending in a period) is an initial ("F."), a dotted abbreviation ("D.C.",
    "U.S.") or a listed one ("St.", "Jr.")."""
    word = token.rstrip(".").lstrip("(\"'")
    return (len(word) == 1 and word.isalpha()) or "." in word or word.lower() in _ABBREVIATIONS


def _first_sentence(line: str) -> str:
    for m in _SENTENCE_PUNCT.finditer(line):
        nxt = m.group(3).strip("(\"'.,").lower()
        if m.group(2) != "." or not _is_abbreviation(m.group(1) + ".") or nxt in _EXPLANATION_WORDS:
            return line[:m.end(2)]  # "D.C. It is ..." ends a sentence, "U.S. Army" does not
    return line


def _answer_after(rest: str) -> str | None:
    """The answer written right after one marker; ``None`` when the marker is not followed by one."""
    line = next((ln for ln in rest.splitlines() if ln.strip()), "")
    line = _clean(line)
    first = line.split(maxsplit=1)[0] if line else ""
    if not re.search(r"\w", line) or first.rstrip(".,:;") in _NOT_AN_ANSWER:
        return None
    line = _first_sentence(line)
    for m in _SEPARATOR.finditer(line):  # "Paris, as the documents say" / "Paris - see Doc 2"
        nxt = m.group(1).strip("(\"'")
        if nxt[:1].islower() or nxt.lower() in _EXPLANATION_WORDS:
            line = line[:m.start()]
            break
    line = _clean(_CONJUNCTION.sub("", line))
    last = line.split()[-1] if line.split() else ""
    if line.endswith(".") and not _is_abbreviation(last):
        line = _clean(line[:-1])
    return line or None


def _clean(text: str) -> str:
    """``text`` without surrounding blanks, markdown emphasis and quotes."""
    return text.strip().strip("*`").strip().strip('"').strip()


def text_final_answer(text: str) -> str | None:
    """The answer of a text reply ``... Final_Answer: X``: X exactly, from the last marker that is
    followed by an answer (``None`` without one). X is the rest of that line (or the next
    non-empty line when the marker ends its line) up to the end of its first sentence, without
    an explanation after a comma, semicolon or spaced dash ("Paris, as Doc 2 says" -> "Paris";
    "Washington, D.C." and "Austin, Texas" stay whole), without "because ..." / "according to
    ...", without markdown emphasis, quotes or a final period (abbreviations such as "D.C.",
    "U.S." and "St." keep theirs). A marker followed by nothing, by punctuation only, or by a
    verb phrase ("Final Answer: is not known yet", "... will follow") is not an answer."""
    for m in reversed(list(_TEXT_ANSWER.finditer(text))):
        answer = _answer_after(text[m.end():])
        if answer is not None:
            return answer
    return None


def plan_step_tools(max_k: int | None = None) -> list[dict[str, Any]]:
    """The two function schemas of the protocol: RAG_search(query, topk) (both required) and
    Final_Answer(answer); ``max_k`` bounds topk in the schema (None: no bound)."""
    topk: dict[str, Any] = {"type": "integer", "description": "how many documents to return", "minimum": 1}
    if max_k is not None:
        topk["maximum"] = max_k
    return [
        {"type": "function", "function": {
            "name": RAG_SEARCH,
            "description": "Search the knowledge base; returns the topk documents closest in meaning to the query.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": "what to look for", "minLength": 1,
                          "maxLength": QUERY_MAX_CHARS},
                "topk": topk,
            }, "required": ["query", "topk"]},
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
        tool = self.new_tool(RAG_SEARCH, k_arg="topk", traj=traj, neutralize=True)
        tools = plan_step_tools(cfg.max_top_k)
        messages = [Message(role="system", content=PLAN_SYSTEM),
                    Message(role="user", content=PLAN_USER.format(question=item.question))]
        traj.messages = messages
        traj.metadata["tools"] = tools  # what the model was offered (the SFT export lists it)
        plan = self.chat(messages)
        traj.steps.append(self.step(plan, error=plan.error))
        traj.metadata["plan"] = plan.text
        messages.append(Message(role="assistant", content=plan.text))
        without_tool = 0
        while True:
            messages.append(Message(role="user", content=STEP_USER))
            turn = self.chat(messages, tools=tools)
            text = turn.text
            calls = list(turn.completion.tool_calls) if turn.completion else []
            text_error = turn.error
            if not calls and text_error is None:
                calls, text_error = tool_calls_from_text(text)
            if not calls:
                answer = text_final_answer(text) if text_error is None else None
                step = self.step(turn, error=None if answer is not None else (text_error or "no tool call"))
                traj.steps.append(step)
                messages.extend(step_to_messages(step, len(traj.steps) - 1))
                if answer is not None:
                    self._finish(traj, answer)
                    return
                without_tool += 1
                if without_tool >= cfg.max_turns_without_tool:
                    traj.finish_reason = "parse_error"
                    return
                continue
            if self._take_calls(turn, calls, tool, traj, messages):
                return
            if all(c.name not in (RAG_SEARCH, FINAL_ANSWER) for c in calls):
                without_tool += 1  # an unknown tool is no tool
                if without_tool >= cfg.max_turns_without_tool:
                    traj.finish_reason = "parse_error"
                    return
            else:
                without_tool = 0

    def _take_calls(self, turn: Turn, calls: list[ToolCall], tool: Any, traj: Trajectory,
                    messages: list[Message]) -> bool:
        """Run the tool calls of one reply in order, one step each; True when the run ended."""
        calls = [c if c.id else c.model_copy(update={"id": f"call_{len(traj.steps)}_{j}"})
                 for j, c in enumerate(calls)]
        messages.append(Message(role="assistant", content=strip_tool_call_text(turn.text) or None,
                                tool_calls=calls))
        for j, call in enumerate(calls):
            step = (self.step(turn, thought=strip_tool_call_text(turn.text), action=call) if j == 0
                    else Step(action=call, usage=Usage()))
            if call.name == FINAL_ANSWER:
                traj.steps.append(step)
                if j + 1 < len(calls):
                    traj.metadata["calls_not_run"] = [c.model_dump() for c in calls[j + 1:]]
                self._finish(traj, str(call.arguments.get("answer") or "").strip())
                return True
            t0 = time.perf_counter()
            if call.name == RAG_SEARCH:
                result = tool(call.arguments)
            else:
                msg = f"unknown tool {call.name!r}; use {RAG_SEARCH} or {FINAL_ANSWER}"
                result = ToolResult(observation=f"Error: {msg}", error=msg)
            step.observation, step.hits, step.error = result.observation, result.hits, result.error
            step.latency += time.perf_counter() - t0
            traj.steps.append(step)
            messages.append(Message(role="tool", content=result.observation, tool_call_id=call.id, name=call.name))
            if len(tool.topk_per_step) >= self.config.max_steps:
                if j + 1 < len(calls):
                    traj.metadata["calls_not_run"] = [c.model_dump() for c in calls[j + 1:]]
                traj.finish_reason = "max_steps"
                return True
        return False

    @staticmethod
    def _finish(traj: Trajectory, answer: str) -> None:
        traj.answer = answer or None
        traj.finish_reason = "answered" if answer else "no_answer"


__all__ = ["PlanStepAgent", "plan_step_tools", "text_final_answer", "RAG_SEARCH", "FINAL_ANSWER"]
