"""``search_r1``: the Search-R1 tag protocol, so Search-R1-style checkpoints can be evaluated.

The model writes one stream: ``<think>..</think>``, ``<search>q</search>``, then (inserted by
us) ``<information>docs</information>``, more thinking and searching, and ``<answer>a</answer>``.
Generation stops at ``</search>``. Through a chat API the stream is carried as alternating
assistant turns and user turns holding the ``<information>`` blocks; ``Trajectory.metadata
["stream"]`` keeps the whole stream as one text, the form those checkpoints were trained on.
A turn with neither a search nor an answer gets the protocol's "invalid action" reminder and
counts toward ``max_steps``; ``max_format_errors`` of them in a row end with ``parse_error``;
an empty ``<answer></answer>`` ends with ``no_answer``.
"""

from __future__ import annotations

import re
import time

from agentrag.agents.config import SearchR1Config
from agentrag.agents.loop import BaseAgent, extract_tag
from agentrag.agents.prompts import SEARCH_R1_INVALID, SEARCH_R1_USER
from agentrag.records import Message, QAItem, ToolCall, Trajectory

SEARCH_ACTION = "search"
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)


def information_block(observation: str) -> str:
    """The text inserted into the stream after a search."""
    return f"<information>{observation}</information>"


class SearchR1Agent(BaseAgent):
    """Search-R1's <search>/<information>/<answer> protocol."""

    name = "search_r1"
    config_class = SearchR1Config
    config: SearchR1Config

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH_ACTION)
        messages = [Message(role="user", content=SEARCH_R1_USER.format(question=item.question))]
        traj.messages = messages
        stream: list[str] = []
        errors_in_a_row = 0
        try:
            for _ in range(cfg.max_steps):
                turn = self.chat(messages, stop=["</search>"])
                text = turn.text
                # the stop string is not returned: close an open search tag
                if text.rfind("<search>") > text.rfind("</search>"):
                    text += "</search>"
                search = _SEARCH.search(text) if turn.error is None else None
                answer = extract_tag(text, "answer") if turn.error is None else None
                if answer is not None and (search is None or text.find("<answer>") < search.start()):
                    stream.append(text)
                    messages.append(Message(role="assistant", content=text))
                    traj.steps.append(self.step(turn, thought=text))
                    traj.answer = answer or None
                    traj.finish_reason = "answered" if answer else "no_answer"
                    return
                if search is not None:
                    text = text[: search.end()]
                    query = search.group(1).strip()
                    t0 = time.perf_counter()
                    result = tool({"query": query})
                    step = self.step(turn, thought=text,
                                     action=ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION,
                                                     arguments={"query": query}),
                                     observation=result.observation, hits=result.hits, error=result.error)
                    step.latency += time.perf_counter() - t0
                    feedback = information_block(result.observation)
                else:
                    step = self.step(turn, thought=text, observation=SEARCH_R1_INVALID,
                                     error=turn.error or "no <search> or <answer>")
                    feedback = SEARCH_R1_INVALID
                traj.steps.append(step)
                stream.extend([text, feedback])
                messages.extend([Message(role="assistant", content=text), Message(role="user", content=feedback)])
                errors_in_a_row = errors_in_a_row + 1 if step.error and not step.hits else 0
                if errors_in_a_row >= cfg.max_format_errors:
                    traj.finish_reason = "parse_error"
                    return
            traj.finish_reason = "max_steps"
        finally:
            traj.metadata["stream"] = "\n".join(stream)


__all__ = ["SearchR1Agent", "information_block"]
