"""``reason_ground``: ReasonRAG's Algorithm 1 (Reasoning -> Grounding -> Reasoning ... -> Terminal).

Up to N = ``max_steps`` rounds, one LLM call each. The Reasoning stage sees the question x and
everything produced so far, y<i (Algorithm 1 line 4); the Grounding stage sees x, y<i and the
retrieved documents (line 6). Every output y_i is appended to y and then checked in the
algorithm's order, whatever the stage (lines 9-18): a ``<query>`` (the first one; the output is
cut after its ``</query>``, and generation stops there) calls the retriever and moves to
Grounding (an empty ``<query>`` moves to Grounding too, with no documents); else an ``<answer>``
ends the run (Terminal); else an ``<evidence>`` moves back to Reasoning; an output with none of
them leaves the stage unchanged (the round is spent; ``Step.error`` says so). Outputs are parsed by
the one protocol parser (:mod:`agentrag.protocol`): the step ends at the first closing tag of its
action (text after it is not part of y); an unclosed, mis-cased or nested tag, or an ``<answer>``
followed by a ``<query>``, is a malformed round (``Step.error`` ``malformed turn: <reason>``; only
the text before its first tag joins y), never a query or an answer. Retrieved documents reach the model verbatim except that protocol tags
inside them are escaped (a document cannot write ``<answer>`` for the model).

After N rounds without an answer, Algorithm 1 returns y unanswered (finish ``max_steps``). With
``forced_answer`` (our default, not in the paper) a pending Grounding step is run first and then
one extra Reasoning round asks for the answer (finish ``answered``, ``no_answer``, or
``max_steps`` if it asks another query). ``parse_error`` after ``max_format_errors`` rounds in a
row without a usable tag.

:meth:`ReasonGroundAgent.round` runs one round on a :class:`GroundingState`; the ReasonRAG MCTS
(synth/reasonrag) shares the prompts, the stop sequence, the cut and the parsing through
:func:`stage_messages`, :data:`QUERY_STOP`, :func:`parse_step` and the round schedule
(:func:`forced_round`), so the tree's steps are exactly the agent's steps.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from agentrag.agents.config import ReasonGroundConfig
from agentrag.agents.loop import BaseAgent, Turn
from agentrag.agents.prompts import (
    FORCE_ANSWER,
    GROUNDING_SYSTEM,
    GROUNDING_USER,
    REASONING_SYSTEM,
    REASONING_USER,
)
from agentrag.agents.tools import NO_DOCUMENTS, RetrievalTool
from agentrag.protocol import ParsedTurn, parse_turn
from agentrag.records import Message, QAItem, ToolCall, Trajectory

SEARCH_ACTION = "search"
QUERY_STOP = "</query>"
Stage = Literal["reasoning", "grounding", "terminal"]
Detected = Literal["query", "answer", "evidence", "none", "malformed"]

#: reason_ground's tags under the one protocol parser: a ``<query>`` or an ``<answer>`` ends the step
#: (generation stops at ``</query>``: an open query at the end of a stopped output is closed there);
#: an ``<evidence>`` is the action when neither is taken
TAGS = {"actions": ("query", "answer"), "inner": ("evidence",), "fallback": "evidence", "closed_by_stop": ("query",)}


def parse_output(text: str, *, stopped: bool = True) -> ParsedTurn:
    """One round's output under the protocol parser (:func:`agentrag.protocol.parse_turn` with
    :data:`TAGS`); ``stopped``: generation ended by a stop (not the token limit), so an open
    ``<query>`` at the end was cut at its ``</query>``."""
    return parse_turn(text.strip(), stopped=stopped, **TAGS)  # type: ignore[arg-type]


def detect(text: str, *, stopped: bool = True) -> tuple[Detected, str | None, str]:
    """Algorithm 1's checks on one output, in its order: ``<query>``, then ``<answer>``, then
    ``<evidence>`` (:func:`parse_output`: the step ends at the first ``</query>`` or ``</answer>``,
    an unclosed query cut by the stop sequence is closed). Returns ``(kind, content, y_i)``; ``y_i``
    is the output as appended to y (the step; for a malformed output, ``kind`` ``"malformed"``, only
    the text before its first tag)."""
    turn = parse_output(text, stopped=stopped)
    if turn.malformed is not None:
        return "malformed", None, turn.lead
    return (turn.action or "none"), turn.content, turn.text  # type: ignore[return-value]


@dataclass
class GroundingState:
    """ReasonRAG's state s = (x, y<i, stage), plus the latest query and its documents."""

    question: str
    y: list[str] = field(default_factory=list)
    stage: Stage = "reasoning"
    query: str = ""
    documents: str = NO_DOCUMENTS

    def messages(self, forced: bool = False) -> list[Message]:
        """The prompt of the next round: p_Reasoning on (x, y<i), or p_Grounding on (x, y<i, docs)."""
        return stage_messages(self.question, self.y, self.stage, self.query, self.documents, forced=forced)


# -- one step of Algorithm 1, shared with the ReasonRAG MCTS (synth/reasonrag), so the tree's
#    actions are exactly the agent's steps ----------------------------------------------------
def stage_messages(question: str, y: list[str], stage: str, query: str = "", documents: str = NO_DOCUMENTS,
                   *, forced: bool = False) -> list[Message]:
    """The prompt of one round (Eq. 4): the Reasoning prompt over x and y<i (with the forced answer
    instruction in a forced round), or the Grounding prompt over x, y<i, the latest query and docs."""
    history = "\n".join(y)
    if stage == "grounding" and not forced:
        user = GROUNDING_USER.format(question=question, history=history or "(none)", query=query,
                                     documents=documents)
        return [Message(role="system", content=GROUNDING_SYSTEM), Message(role="user", content=user)]
    user = REASONING_USER.format(question=question, history=history).rstrip()
    if forced:
        user += "\n\n" + FORCE_ANSWER
    return [Message(role="system", content=REASONING_SYSTEM), Message(role="user", content=user)]


def parse_action(text: str, stage: str, *, forced: bool = False,
                 accept_untagged_answer: bool = False, stopped: bool = True) -> tuple[str | None, str | None]:
    """The action of one round's output, in Algorithm 1's order whatever ``stage`` is (see
    :func:`detect`): ``("query", q)`` (the first ``<query>``, not in a forced round; ``q`` may be
    empty: the run still moves to Grounding, with no documents),
    ``("answer", a)`` (``a`` may be empty), ``("evidence", e)`` (not in a forced round), or
    ``(None, None)`` (and always for a malformed output). ``accept_untagged_answer`` takes a forced
    round's untagged text as its answer (off in the agent; an option of the ReasonRAG tree for
    models that ignore the tags)."""
    del stage  # kept in the signature: the checks do not depend on it (Algorithm 1 lines 9-18)
    return _action_of(parse_output(text, stopped=stopped), forced, accept_untagged_answer)


def _action_of(turn: ParsedTurn, forced: bool, accept_untagged_answer: bool) -> tuple[str | None, str | None]:
    if turn.malformed is not None:
        return None, None
    if turn.action == "answer":
        return "answer", turn.content
    if not forced and turn.action == "query":
        return "query", turn.content or ""
    if not forced and turn.action == "evidence":
        return "evidence", turn.content
    if forced and accept_untagged_answer and turn.text:
        return "answer", untagged_answer(turn.text)
    return None, None


def untagged_answer(text: str) -> str:
    """A short answer from untagged text: what follows the last "answer is", up to the end of
    that sentence (or the first sentence when the phrase is absent)."""
    found = re.split(r"answer is:?", text, flags=re.IGNORECASE)
    tail = found[-1] if len(found) > 1 else text
    first = re.split(r"(?<!\b[A-Z])\.(?:\s|$)|\n", tail.strip(), maxsplit=1)[0]
    return first.strip(" \"'*:") or text.strip()


def apply_stop(text: str) -> str:
    """``text`` as generation with the stop sequence ``</query>`` returns it: everything up to the
    first ``</query>`` (kept, so the step is closed); a backend that ignores ``stop`` (or a
    scripted model) cannot carry text past it into y."""
    at = text.find(QUERY_STOP)
    return text if at < 0 else text[:at + len(QUERY_STOP)]


@dataclass(frozen=True)
class ParsedStep:
    """One round's output as the agent keeps it: what :func:`detect` found, the action and its
    content (:func:`parse_action`), ``text``, the step y_i appended to y (cut at the end of its
    action; a malformed output's text before its first tag), and why the output is malformed."""

    kind: Detected
    action: str | None
    content: str | None
    text: str
    malformed: str | None = None


def parse_step(raw: str, *, forced: bool = False, accept_untagged_answer: bool = False,
               stopped: bool = True) -> ParsedStep:
    """One round's raw output -> the step y_i and its action, the one place the agent and the
    ReasonRAG tree cut and parse steps (so the tree's steps are exactly the agent's)."""
    turn = parse_output(raw, stopped=stopped)
    action, content = _action_of(turn, forced, accept_untagged_answer)
    if turn.malformed is not None:
        return ParsedStep("malformed", None, None, turn.lead, turn.malformed)
    return ParsedStep(turn.action or "none", action, content, turn.text)  # type: ignore[arg-type]


def forced_round(rounds_done: int, stage: str, max_rounds: int) -> bool:
    """Whether the next round of a trajectory capped at ``max_rounds`` rounds is the forced answer
    round, on the agent's schedule with ``max_steps = max_rounds - 1`` and ``forced_answer``:
    free rounds up to ``max_rounds - 1``, then a Grounding step for a query still pending, then the
    forced round (so a query issued in the last free round is grounded before the answer)."""
    if rounds_done < max_rounds - 1:
        return False
    return not (rounds_done == max_rounds - 1 and stage == "grounding")


class ReasonGroundAgent(BaseAgent):
    """ReasonRAG inference (Algorithm 1) with our Reasoning and Grounding prompts."""

    name = "reason_ground"
    config_class = ReasonGroundConfig
    config: ReasonGroundConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH_ACTION, traj=traj, neutralize=True)
        state = GroundingState(item.question)
        errors_in_a_row = 0
        for _ in range(cfg.max_steps):
            if self.round(state, traj, tool):
                return
            errors_in_a_row = errors_in_a_row + 1 if traj.steps[-1].error and not traj.steps[-1].hits else 0
            if errors_in_a_row >= cfg.max_format_errors:
                traj.finish_reason = "parse_error"
                return
        if cfg.forced_answer:
            if state.stage == "grounding" and self.round(state, traj, tool):
                return
            if self.round(state, traj, tool, forced=True):
                return
        traj.finish_reason = "max_steps"

    def round(self, state: GroundingState, traj: Trajectory, tool: RetrievalTool, *, forced: bool = False) -> bool:
        """One round of Algorithm 1 on ``state`` (appends a step to ``traj``); True when it ended
        the run (an answer, or the forced round's outcome). The index of a forced round's step is
        ``traj.metadata["forced_round"]`` (the SFT export rebuilds each round's request)."""
        if forced:
            traj.metadata["forced_round"] = len(traj.steps)
        turn = self.chat(state.messages(forced), stop=[QUERY_STOP])
        if turn.error is not None:
            traj.steps.append(self.step(turn, error=turn.error))
            if forced:
                traj.finish_reason = "no_answer"
            return forced
        stopped = turn.completion is None or turn.completion.finish_reason != "length"
        step = parse_step(turn.text, forced=forced, stopped=stopped)
        kind, action, content, y_i = step.kind, step.action, step.content, step.text
        state.y.append(y_i)
        if action == "query":
            self._retrieve(turn, y_i, content or "", state, traj, tool)
            return False
        if action == "answer":
            traj.steps.append(self.step(turn, thought=y_i))
            state.stage = "terminal"
            traj.answer = content or None
            traj.finish_reason = "answered" if content else "no_answer"
            return True
        if action == "evidence":
            traj.steps.append(self.step(turn, thought=y_i))
            state.stage = "reasoning"
            return False
        error = (f"malformed turn: {step.malformed}" if step.malformed
                 else "the forced final round gave no <answer>" if forced
                 else "no <query>, <answer> or <evidence> in the output")
        traj.steps.append(self.step(turn, thought=y_i, error=error))
        if forced:
            traj.finish_reason = "max_steps" if kind == "query" else "no_answer"
        return forced

    def _retrieve(self, turn: Turn, y_i: str, query: str, state: GroundingState, traj: Trajectory,
                  tool: RetrievalTool) -> None:
        t0 = time.perf_counter()
        call = ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION, arguments={"query": query})
        if not query:  # an empty <query>: Algorithm 1 still moves to Grounding; nothing to retrieve
            state.query, state.documents, state.stage = "", NO_DOCUMENTS, "grounding"
            traj.steps.append(self.step(turn, thought=y_i, action=call, observation=NO_DOCUMENTS))
            return
        result = tool.search(query, self.config.top_k)
        state.query, state.documents, state.stage = query, result.observation, "grounding"
        step = self.step(turn, thought=y_i, action=call, observation=result.observation, hits=result.hits,
                         error=result.error)
        step.latency += time.perf_counter() - t0
        traj.steps.append(step)


__all__ = ["ReasonGroundAgent", "GroundingState", "detect", "SEARCH_ACTION", "stage_messages", "parse_action",
           "untagged_answer", "apply_stop", "ParsedStep", "parse_step", "QUERY_STOP", "forced_round", "parse_output",
           "TAGS"]
