"""``reason_ground``: ReasonRAG's Algorithm 1 (Reasoning -> Grounding -> Reasoning ... -> Terminal).

Up to N = ``max_steps`` rounds, one LLM call each. In the Reasoning stage the model sees the
question and everything produced so far (y) and ends with ``<query>q</query>`` (the retriever
is called with q and the stage becomes Grounding) or ``<answer>a</answer>`` (Terminal). In the
Grounding stage it sees the latest query and the retrieved documents and extracts
``<evidence>...</evidence>``; the stage goes back to Reasoning. Every output is appended to y,
as in the algorithm. An output without the tag its stage expects leaves the stage unchanged
(the round is spent; ``Step.error`` says what was missing). The last round always asks for the
answer. Finish: ``answered``; ``no_answer`` (empty answer, or none in the forced round);
``max_steps`` (the forced round asked another query); ``parse_error`` after
``max_format_errors`` malformed rounds in a row.
"""

from __future__ import annotations

import re
import time

from agentrag.agents.config import ReasonGroundConfig
from agentrag.agents.loop import BaseAgent, extract_tag
from agentrag.agents.prompts import (
    FORCE_ANSWER,
    GROUNDING_SYSTEM,
    GROUNDING_USER,
    REASONING_SYSTEM,
    REASONING_USER,
)
from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.records import Message, QAItem, ToolCall, Trajectory

SEARCH_ACTION = "search"


class ReasonGroundAgent(BaseAgent):
    """ReasonRAG inference (Algorithm 1) with our Reasoning and Grounding prompts."""

    name = "reason_ground"
    config_class = ReasonGroundConfig
    config: ReasonGroundConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH_ACTION)
        y: list[str] = []
        stage = "reasoning"
        query, documents = "", NO_DOCUMENTS
        errors_in_a_row = 0
        for i in range(cfg.max_steps):
            forced = i == cfg.max_steps - 1
            messages = stage_messages(item.question, y, stage, query, documents, forced=forced)
            turn = self.chat(messages)
            text = turn.text
            if turn.error is None:
                y.append(text.strip())
            if stage == "grounding" and not forced:
                evidence = extract_tag(text, "evidence") if turn.error is None else None
                error = turn.error or (None if evidence is not None else "no <evidence> in grounding output")
                traj.steps.append(self.step(turn, error=error))
                if evidence is not None:
                    stage = "reasoning"
            else:
                new_query = extract_tag(text, "query") if turn.error is None else None
                answer = extract_tag(text, "answer") if turn.error is None else None
                if new_query and not forced:
                    query = new_query
                    t0 = time.perf_counter()
                    result = tool.search(query, cfg.top_k)
                    documents = result.observation
                    step = self.step(turn, action=ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION,
                                                           arguments={"query": query}),
                                     observation=result.observation, hits=result.hits, error=result.error)
                    step.latency += time.perf_counter() - t0
                    traj.steps.append(step)
                    stage = "grounding"
                elif answer is not None:
                    traj.steps.append(self.step(turn))
                    traj.answer = answer or None
                    traj.finish_reason = "answered" if answer else "no_answer"
                    return
                else:
                    error = turn.error or ("the forced final round gave no <answer>" if forced
                                           else "no <query> or <answer> in reasoning output")
                    traj.steps.append(self.step(turn, error=error))
                    if forced:
                        traj.finish_reason = "max_steps" if new_query else "no_answer"
                        return
            errors_in_a_row = errors_in_a_row + 1 if traj.steps[-1].error and not traj.steps[-1].hits else 0
            if errors_in_a_row >= cfg.max_format_errors:
                traj.finish_reason = "parse_error"
                return
        traj.finish_reason = "no_answer"  # unreachable in practice: the last round returns


# -- one step of Algorithm 1, shared with the ReasonRAG MCTS (synth/reasonrag), so the tree's
#    actions are exactly the agent's steps ----------------------------------------------------
def stage_messages(question: str, y: list[str], stage: str, query: str = "", documents: str = NO_DOCUMENTS,
                   *, forced: bool = False) -> list[Message]:
    """The prompt of one round (Eq. 2 / 4): the Reasoning prompt over x and y (with the forced
    answer instruction in the last round), or the Grounding prompt over the latest query and docs."""
    if stage == "reasoning" or forced:
        user = REASONING_USER.format(question=question, history="\n".join(y)).rstrip()
        if forced:
            user += "\n\n" + FORCE_ANSWER
        return [Message(role="system", content=REASONING_SYSTEM), Message(role="user", content=user)]
    user = GROUNDING_USER.format(question=question, query=query, documents=documents)
    return [Message(role="system", content=GROUNDING_SYSTEM), Message(role="user", content=user)]


def parse_action(text: str, stage: str, *, forced: bool = False,
                 accept_untagged_answer: bool = False) -> tuple[str | None, str | None]:
    """The action of one round's output, parsed as the agent does: ``("query", q)`` (Reasoning,
    not forced, a non-empty ``<query>``), ``("answer", a)`` (``<answer>``; ``a`` may be empty),
    ``("evidence", e)`` (Grounding, ``<evidence>``), or ``(None, None)`` when the tag the stage
    expects is missing. ``accept_untagged_answer`` takes a forced round's untagged text as its
    answer (off in the agent; an option of the ReasonRAG tree for models that ignore the tags)."""
    if stage == "grounding" and not forced:
        evidence = extract_tag(text, "evidence")
        return ("evidence", evidence) if evidence is not None else (None, None)
    new_query = extract_tag(text, "query")
    if new_query and not forced:
        return "query", new_query
    answer = extract_tag(text, "answer")
    if answer is not None:
        return "answer", answer
    if forced and accept_untagged_answer and text.strip():
        return "answer", untagged_answer(text)
    return None, None


def untagged_answer(text: str) -> str:
    """A short answer from untagged text: what follows the last "answer is", up to the end of
    that sentence (or the first sentence when the phrase is absent)."""
    found = re.split(r"answer is:?", text, flags=re.IGNORECASE)
    tail = found[-1] if len(found) > 1 else text
    first = re.split(r"(?<!\b[A-Z])\.(?:\s|$)|\n", tail.strip(), maxsplit=1)[0]
    return first.strip(" \"'*:") or text.strip()


__all__ = ["ReasonGroundAgent", "SEARCH_ACTION", "stage_messages", "parse_action", "untagged_answer"]
