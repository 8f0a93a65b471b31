"""What the non-agentic baselines (naive, standard_rag, ircot, iter_retgen) share: reading a short
answer out of a free-text reply, one answering turn, and a retrieval recorded as a step.

The baselines are fixed pipelines, not protocols the model drives: the code decides when to
retrieve and with which query, the model only writes text. Their trajectories use the agents'
records, so eval and the viewer read them as they read any agent's (the SFT export writes each LLM
call as the single-turn chat it was, :mod:`agentrag.export.pipelines`):

- a retrieval is a step whose action is a ``search`` call with the query the pipeline used and
  whose observation is the documents retrieved (``Doc i (Title: t) text``, protocol tags escaped);
  its thought is the model output the query came from (empty when the query is the question);
- the answering turn is a step without an action; ``Trajectory.answer`` is :func:`short_answer`
  of its text; ``Trajectory.messages`` is the request of the last LLM call plus its reply.
"""

from __future__ import annotations

import re
import time

from agentrag.agents.base import ToolResult
from agentrag.agents.loop import BaseAgent, Turn
from agentrag.agents.tools import RetrievalTool
from agentrag.records import Message, Step, ToolCall, Trajectory

SEARCH_ACTION = "search"
#: "answer is", "answer is:" (IRCoT's stop phrase "So the answer is: X.")
ANSWER_IS = re.compile(r"\banswer is\b\s*:?", re.IGNORECASE)
#: a sentence ends at . ! or ? followed by a space or the end, but not after a lone capital (an
#: initial, "U.S.")
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])[.!?](?=\s|$)")
_ANSWER_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*", re.IGNORECASE)


def first_sentence(text: str | None) -> str:
    """The first sentence of ``text``: its first non-empty line up to the first sentence end
    (kept); the whole line when it has none."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            m = _SENTENCE_END.search(line)
            return line[:m.end()] if m else line
    return ""


def short_answer(text: str | None) -> str | None:
    """The prediction in a free-text reply: the first sentence after the last "answer is" when the
    reply has one, else the reply's first sentence; a leading "Answer:", markdown emphasis, a final
    period and quotes around the whole answer are removed. ``None`` when nothing is left."""
    if not text:
        return None
    parts = ANSWER_IS.split(text)
    tail = parts[-1] if len(parts) > 1 else text
    answer = _ANSWER_LABEL.sub("", first_sentence(tail)).strip().strip("*").strip().rstrip(".").strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "\"'`":  # quoted whole
        answer = answer[1:-1].strip()
    return answer or None


def answer_turn(agent: BaseAgent, messages: list[Message], traj: Trajectory) -> Turn:
    """One answering LLM call on ``messages``, appended to ``traj`` as a step without an action;
    sets the answer and the finish reason (``answered``; ``no_answer`` for an empty reply;
    ``parse_error`` for output the backend could not parse)."""
    turn = agent.chat(messages)
    traj.messages = [*messages, Message(role="assistant", content=turn.text)]
    if turn.error is not None:
        traj.steps.append(agent.step(turn, error=turn.error))
        traj.answer, traj.finish_reason = None, "parse_error"
        return turn
    answer = short_answer(turn.text)
    traj.steps.append(agent.step(turn, error=None if answer else "empty reply"))
    traj.answer = answer
    traj.finish_reason = "answered" if answer else "no_answer"
    return turn


def retrieval_step(agent: BaseAgent, tool: RetrievalTool, query: str, traj: Trajectory,
                   turn: Turn | None = None, thought: str = "") -> ToolResult:
    """Retrieve ``agent.config.top_k`` documents with ``query`` and append the step: the LLM
    ``turn`` whose output gave the query (with ``thought``, the part kept) or, for the
    question itself, a step with no LLM call."""
    t0 = time.perf_counter()
    result = tool.search(query, agent.config.top_k)
    call = ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION, arguments={"query": query})
    if turn is not None:
        step = agent.step(turn, thought=thought, action=call, observation=result.observation, hits=result.hits,
                          error=result.error)
    else:
        step = Step(thought=thought, action=call, observation=result.observation, hits=result.hits, error=result.error)
    step.latency += time.perf_counter() - t0
    traj.steps.append(step)
    return result


__all__ = ["SEARCH_ACTION", "ANSWER_IS", "first_sentence", "short_answer", "answer_turn", "retrieval_step"]
