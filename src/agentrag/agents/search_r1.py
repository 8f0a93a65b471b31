"""``search_r1``: the Search-R1 tag protocol, so Search-R1-style checkpoints can be evaluated.

The model writes one stream: ``<think>..</think>``, ``<search>q</search>``, then (inserted by
us) ``\\n\\n<information>Doc 1(Title: t) text\\nDoc 2(Title: t) text</information>\\n\\n``, more
thinking and searching, and ``<answer>a</answer>``. Generation stops at ``</search>``. The
stream is one assistant string, the single-string rollout Search-R1 trains on: each request is
the user prompt plus the stream so far as one assistant message, and ``Trajectory.messages``
ends with that message (``metadata["stream"]`` holds it too).

Tags are parsed from model-generated segments only, never from inserted documents (where
protocol tags are escaped anyway). Text inside ``<think>`` is not an action. The first closed
``<search>`` or ``<answer>`` decides the action (as in Search-R1); the answer is the last closed
``<answer>...</answer>`` of that output (an unclosed one is no answer). A turn with neither gets
the "invalid action" note in the stream and counts toward ``max_steps``; ``max_format_errors``
of them in a row end with ``parse_error``; an empty ``<answer></answer>`` ends with ``no_answer``.
"""

from __future__ import annotations

import re
import time

from agentrag.agents.config import SearchR1Config
from agentrag.agents.loop import BaseAgent
from agentrag.agents.prompts import SEARCH_R1_INVALID, SEARCH_R1_USER, read_prompt_template
from agentrag.agents.tools import NO_DOCUMENTS, neutralize_tags
from agentrag.records import Hit, Message, QAItem, ToolCall, Trajectory

SEARCH_ACTION = "search"
_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


def search_r1_documents(hits: list[Hit]) -> str:
    """Search-R1's document format: ``Doc i(Title: t) text``, one per line (tags escaped)."""
    if not hits:
        return NO_DOCUMENTS
    return neutralize_tags("\n".join(f"Doc {i}(Title: {h.title}) {h.text}" for i, h in enumerate(hits, start=1)))


def information_block(observation: str) -> str:
    """The text inserted into the stream after a search."""
    return f"\n\n<information>{observation.strip()}</information>\n\n"


def _outside_think(text: str) -> str:
    """``text`` with every ``<think>`` block (an unclosed last one to the end) blanked out,
    positions kept."""
    return _THINK.sub(lambda m: " " * len(m.group(0)), text)


def parse_action(text: str) -> tuple[str | None, str, int]:
    """The action of one model output: ``("search", query, end)``, ``("answer", answer, end)`` or
    ``(None, "", len(text))``; ``end`` is where the action's closing tag ends."""
    visible = _outside_think(text)
    m = _ACTION.search(visible)
    if m is None:
        return None, "", len(text)
    if m.group(1) == "search":
        return "search", m.group(2).strip(), m.end()
    last = list(_ANSWER.finditer(visible))[-1]
    return "answer", last.group(1).strip(), last.end()


class SearchR1Agent(BaseAgent):
    """Search-R1's <search>/<information>/<answer> protocol."""

    name = "search_r1"
    config_class = SearchR1Config
    config: SearchR1Config

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH_ACTION, traj=traj)
        template = read_prompt_template(cfg.prompt_template) if cfg.prompt_template else None
        prompt = Message(role="user", content=template.replace("{question}", item.question) if template
                         else SEARCH_R1_USER.format(question=item.question))
        traj.messages = [prompt]
        stream = ""
        errors_in_a_row = 0
        try:
            for _ in range(cfg.max_steps):
                messages = [prompt] + ([Message(role="assistant", content=stream)] if stream else [])
                turn = self.chat(messages, stop=["</search>"])
                text = turn.text
                # the stop string is not returned: close an open search tag
                if _outside_think(text).rfind("<search>") > text.rfind("</search>"):
                    text += "</search>"
                kind, value, end = parse_action(text) if turn.error is None else (None, "", len(text))
                if kind == "answer":
                    stream += text[:end]
                    traj.steps.append(self.step(turn, thought=text[:end]))
                    traj.answer = value or None
                    traj.finish_reason = "answered" if value else "no_answer"
                    return
                if kind == "search":
                    text = text[:end]
                    t0 = time.perf_counter()
                    result = tool({"query": value})
                    observation = (search_r1_documents(result.hits) if result.error is None
                                   else neutralize_tags(result.observation))
                    step = self.step(turn, thought=text,
                                     action=ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION,
                                                     arguments={"query": value}),
                                     observation=observation, hits=result.hits, error=result.error)
                    step.latency += time.perf_counter() - t0
                    feedback = information_block(observation)
                else:
                    step = self.step(turn, thought=text, observation=SEARCH_R1_INVALID,
                                     error=turn.error or "no <search> or <answer>")
                    feedback = f"\n{SEARCH_R1_INVALID}\n"
                traj.steps.append(step)
                stream += text + feedback
                errors_in_a_row = errors_in_a_row + 1 if step.error and not step.hits else 0
                if errors_in_a_row >= cfg.max_format_errors:
                    traj.finish_reason = "parse_error"
                    return
            traj.finish_reason = "max_steps"
        finally:
            traj.metadata["stream"] = stream
            if stream:
                traj.messages = [prompt, Message(role="assistant", content=stream)]


__all__ = ["SearchR1Agent", "information_block", "parse_action", "search_r1_documents"]
