"""The planner–executor protocol of EviPath (§3.1, Eq. 1): the two instruction prompts I_p and
I_e (our wording of what Tables 10 and 11 require) and the parsers of both roles' outputs.

Planner turn: ``<think>…</think>`` then either ``<action>Search("question") …</action>`` (one
or more complete, independently executable sub-questions; several for parallel work such as
comparisons) or ``<answer>…</answer>``. Its observations are the executor's answer sentences.

Executor turn (one sub-question, an indexed list of evidence): ``<think>…</think>
<select>[i, …]</select> <answer>one declarative sentence</answer>``.

Both roles' outputs are parsed by the one protocol parser (:mod:`agentrag.protocol`): the
planner's step ends at the first ``</action>`` or ``</answer>``, the executor's at the first
``</answer>``; an unclosed, mis-cased or nested tag, or an ``<answer>`` followed by an action,
makes a malformed turn (``error`` names the reason), never a search or an answer.

Shared by the agent (inference) and the EviPath synthesizer (training data), so the data
trains exactly the protocol the agent runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentrag.protocol import ParsedTurn, neutralize_tags, parse_turn

PLANNER_SYSTEM = (
    "You answer a complex question by planning and searching step by step.\n"
    "First break the question into simpler sub-questions (a plan), then solve them in order.\n"
    "Write your reasoning between <think> and </think>.\n"
    "To look something up, write <action>Search(\"question\")</action>. Each search must be one "
    "complete question (an interrogative sentence ending with '?') that can be answered on its own: "
    "use full entity names, never pronouns such as 'he', 'it', 'this' or 'these'. You may put several "
    "Search(\"...\") lines in one action when the sub-questions do not depend on each other, for "
    "example to compare two things.\n"
    "After each action you receive an observation with the answers to your searches.\n"
    "When you can answer, write <answer>short answer</answer> and no action.")

EXECUTOR_SYSTEM = (
    "You answer one question from a numbered list of evidence. Some of the evidence is irrelevant "
    "noise.\n"
    "1. Between <think> and </think>, say what the question asks for and summarize what the "
    "relevant evidence states about it.\n"
    "2. Between <select> and </select>, give the indices of the evidence that supports the answer, "
    "as a list such as [2] or [0, 5]; select all that contain the answer.\n"
    "3. Between <answer> and </answer>, answer with one complete declarative sentence.\n"
    "If no evidence is relevant, write <answer>No relevant information found.</answer> with an "
    "empty selection [].\n"
    "Template:\n<think> ... </think>\n<select> [i] </select>\n<answer> The complete answer sentence. </answer>")

NO_INFORMATION = "No relevant information found."

_INDEX = re.compile(r"\d+")


def tag(text: str, name: str) -> str | None:
    """Content of the first closed ``<name>…</name>`` of ``text`` when ``text`` is a well-formed
    turn with that tag (:func:`agentrag.protocol.parse_turn`), else None."""
    turn = parse_turn(text, actions=(name,))
    return turn.content if turn.action == name else None


def planner_turn(text: str) -> ParsedTurn:
    """A planner output under the protocol parser: ``<action>`` or ``<answer>`` ends the step,
    ``<think>`` precedes it."""
    return parse_turn(text, actions=("action", "answer"), inner=("think",))


def executor_turn(text: str) -> ParsedTurn:
    """An executor output under the protocol parser: ``<answer>`` ends the step, ``<think>`` and
    ``<select>`` precede it."""
    return parse_turn(text, actions=("answer",), inner=("think", "select"))


@dataclass
class PlannerTurn:
    """A parsed planner output: thought, searches (Q_i) and/or final answer; ``error`` if neither."""

    thought: str = ""
    searches: list[str] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None


def parse_searches(action: str) -> list[str]:
    """The questions of ``Search("…")`` lines in an action block (quotes optional)."""
    out = []
    for chunk in re.split(r"Search\s*\(", action)[1:]:
        body = chunk.rsplit(")", 1)[0] if ")" in chunk else chunk
        body = re.sub(r"^\s*\[[^\]]*\]\s*,", "", body)  # Table 8's Search([i], "question") form
        q = " ".join(body.split()).strip().strip("\"'“”").strip()
        if q:
            out.append(q)
    return out


def parse_planner(text: str) -> PlannerTurn:
    """Parse one planner turn: the action or answer it opens first ends it (a malformed turn is an
    ``error`` naming the reason)."""
    turn = planner_turn(text)
    thought = turn.first("think") or ""
    if turn.malformed is not None:
        return PlannerTurn(thought=thought, error=f"malformed turn: {turn.malformed}")
    action = turn.content if turn.action == "action" else None
    answer = turn.content if turn.action == "answer" else None
    if action is not None:
        searches = parse_searches(action)
        if searches:
            return PlannerTurn(thought=thought, searches=searches)
        if answer is None:
            return PlannerTurn(thought=thought, error=f"no Search(\"...\") in the action {action[:120]!r}")
    if answer is not None:
        return PlannerTurn(thought=thought, answer=answer)
    return PlannerTurn(thought=thought, error="neither <action> nor <answer> in the planner output")


def render_planner_turn(thought: str, searches: list[str] | None = None, answer: str | None = None) -> str:
    """A planner turn as the model writes it (the training target of Eq. 7)."""
    body = f"<think>\n{thought.strip()}\n</think>\n"
    if searches:
        return body + "<action>\n" + "\n".join(f'Search("{q}")' for q in searches) + "\n</action>"
    return body + f"<answer> {answer or ''} </answer>"


def render_observation(answers: list[str]) -> str:
    """The user turn that returns the executor's answer sentences to the planner."""
    return "Observation:\n" + "\n".join(a.strip() for a in answers)


def render_evidence(texts: list[str]) -> str:
    """The indexed evidence list (``[i] text``); protocol tags inside a passage are escaped so a
    document cannot open ``<answer>``/``<select>`` for the executor (see ``neutralize_tags``)."""
    return "\n".join(f"[{i}] {neutralize_tags(' '.join(t.split()))}" for i, t in enumerate(texts))


def executor_user(question: str, evidence: list[str]) -> str:
    """The executor's user turn: the sub-question and the indexed evidence list."""
    return f"Question: {question}\nSupporting evidence:\n{render_evidence(evidence)}"


@dataclass
class ExecutorTurn:
    thought: str = ""
    select: list[int] | None = None
    answer: str | None = None
    error: str | None = None


def parse_select(text: str | None) -> list[int] | None:
    """``[2, 5]`` / ``2, 5`` / ``[]`` → list of ints; None when there is no select tag."""
    if text is None:
        return None
    return [int(x) for x in _INDEX.findall(text)]


def parse_executor(text: str) -> ExecutorTurn:
    """Parse one executor turn (its step ends at the first ``</answer>``; a malformed turn is an
    ``error`` naming the reason)."""
    turn = executor_turn(text)
    thought = turn.first("think") or ""
    if turn.malformed is not None:
        return ExecutorTurn(thought=thought, error=f"malformed turn: {turn.malformed}")
    select = parse_select(turn.first("select"))
    answer = turn.content if turn.action == "answer" else None
    error = None
    if answer is None or not answer:
        error = "no <answer> in the executor output"
    elif select is None:
        error = "no <select> in the executor output"
    return ExecutorTurn(thought=thought, select=select, answer=answer or None, error=error)


def render_executor_turn(thought: str, select: list[int], answer: str) -> str:
    """An executor turn as the model writes it (the training target of Eq. 7)."""
    return (f"<think> {thought.strip()} </think>\n<select> [{', '.join(str(i) for i in select)}] </select>\n"
            f"<answer> {answer.strip()} </answer>")


__all__ = ["PLANNER_SYSTEM", "EXECUTOR_SYSTEM", "NO_INFORMATION", "PlannerTurn", "ExecutorTurn", "tag",
           "planner_turn", "executor_turn",
           "parse_searches", "parse_planner", "parse_executor", "parse_select", "render_planner_turn",
           "render_observation", "render_evidence", "executor_user", "render_executor_turn"]
