"""``search_r1``: the Search-R1 tag protocol, so Search-R1-style checkpoints can be evaluated.

The model writes one stream: ``<think>..</think>``, ``<search>q</search>``, then (inserted by
us) ``\\n\\n<information>Doc 1(Title: t) text\\nDoc 2(Title: t) text</information>\\n\\n``, more
thinking and searching, and ``<answer>a</answer>``. Generation stops at ``</search>``. The
stream is one assistant string, the single-string rollout Search-R1 trains on: each request is
the user prompt plus the stream so far as one assistant message, and ``Trajectory.messages``
ends with that message (``metadata["stream"]`` holds it too).

Tags are parsed from model-generated segments only, never from inserted documents (where
protocol tags and control tokens are escaped anyway), by the one protocol parser
(:mod:`agentrag.protocol`). Text inside ``<think>`` is not an action. The first ``<search>`` or
``<answer>`` opened decides the action (as in Search-R1) and the step ends at its first closing tag
(text after it never joins the stream). An unclosed (other than a search cut by the stop
sequence), mis-cased or nested tag, or an ``<answer>`` followed by another action, is a malformed
turn; it and a turn with neither tag get the "invalid action" note in the stream and count toward
``max_steps``; ``max_format_errors`` of them in a row end with ``parse_error``; an empty
``<answer></answer>`` ends with ``no_answer``.
"""

from __future__ import annotations

import time

from agentrag.agents.config import SearchR1Config
from agentrag.agents.loop import BaseAgent
from agentrag.agents.prompts import SEARCH_R1_INVALID, SEARCH_R1_USER, read_prompt_template
from agentrag.agents.tools import NO_DOCUMENTS, neutralize_tags
from agentrag.protocol import ParsedTurn, parse_turn
from agentrag.records import Hit, Message, QAItem, ToolCall, Trajectory

SEARCH_ACTION = "search"


def search_r1_documents(hits: list[Hit]) -> str:
    """Search-R1's document format: ``Doc i(Title: t) text``, one per line (tags escaped)."""
    if not hits:
        return NO_DOCUMENTS
    return neutralize_tags("\n".join(f"Doc {i}(Title: {h.title}) {h.text}" for i, h in enumerate(hits, start=1)))


def information_block(observation: str) -> str:
    """The text inserted into the stream after a search."""
    return f"\n\n<information>{observation.strip()}</information>\n\n"


def parse_turn_text(text: str, *, stopped: bool = True) -> ParsedTurn:
    """One model output under the protocol parser: ``<search>`` and ``<answer>`` end the step
    (an open ``<search>`` at the end of a ``stopped`` output was cut at its ``</search>``), the
    first ``</answer>`` ends the turn whatever follows (the released rollout cuts there), and
    ``<think>`` blocks are not parsed."""
    return parse_turn(text, actions=("search", "answer"), closed_by_stop=("search",), stopped=stopped,
                      blank_think=True, answer_ends_turn=True)


def parse_action(text: str) -> tuple[str | None, str, int]:
    """The action of one model output: ``("search", query, end)``, ``("answer", answer, end)`` or
    ``(None, "", len(text))`` (also for a malformed turn); ``end`` is where the action's closing tag
    ends (past the end of ``text`` when a stopped search is closed)."""
    turn = parse_turn_text(text)
    if turn.action is None:
        return None, "", len(text)
    return turn.action, turn.content or "", turn.end


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
                stopped = turn.completion is None or turn.completion.finish_reason != "length"
                parsed = parse_turn_text(text, stopped=stopped) if turn.error is None else None
                if parsed is not None and parsed.closed_by_stop:  # the stop string is not returned: close it
                    text += "</search>"
                kind = parsed.action if parsed is not None else None
                value, end = (parsed.content or "", parsed.end) if parsed is not None else ("", len(text))
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
                    why = parsed.malformed if parsed is not None else None
                    step = self.step(turn, thought=text, observation=SEARCH_R1_INVALID,
                                     error=turn.error or (f"malformed turn: {why}" if why else "no <search> or <answer>"))
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


__all__ = ["SearchR1Agent", "information_block", "parse_action", "parse_turn_text", "search_r1_documents"]
