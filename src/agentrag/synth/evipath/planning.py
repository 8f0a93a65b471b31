"""Abductive subtask planning (planner side, §4.1).

Task decomposition (Eq. 3): from (q, a, F̂) the LLM writes the plan P = {q_1..q_n}; a later
sub-question may refer to an earlier answer with the placeholder ``#k``.

Iterative exploration (Eq. 4–5): each iteration sees the state s_i (plan, earlier thoughts,
sub-questions and answers), a and F̂, and writes the thought R_i (placeholders instantiated,
which remaining sub-questions are solvable now, the updated plan) and the action Q_i: one or
more complete sub-questions, answered here by f_QA (Eq. 6) to give the observation. The
sub-questions of one action are independent and answered at once
(:func:`agentrag.threads.parallel_calls`), with the records of answering them one after another. The last
iteration writes the final answer and no action.

Both are free-text protocols (a numbered list; ``<think>``/``<action>``/``<answer>`` tags) because
the text itself is the planner's SFT data (Eq. 7); what is parsed out of them is validated by
pydantic models with length bounds (:class:`PlanSteps`), and output that fails is a flagged
record. LLM failures follow the failure policy (:func:`agentrag.synth.common.call_text`): an
outage or a 401/404 propagates, a request over the context window is a flagged record.
"""

from __future__ import annotations

import re
import time
from functools import partial
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentrag.agents.pe_protocol import parse_planner
from agentrag.errors import ParseError
from agentrag.llm.base import LLM
from agentrag.llm.structured import validate_structured
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_text
from agentrag.synth.evipath.answering import answer_subquestion
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.demos import PLAN_DEMO, STEP_DEMO
from agentrag.synth.evipath.schema import EviItem, IterationRecord, PlanRecord, SubAnswerRecord
from agentrag.threads import parallel_calls

PLAN_SYSTEM = (
    "You reverse-engineer how a complex question is answered. You get the question, its correct answer "
    "and the evidence that supports it. Work out which facts link the question to the answer and in what "
    "order, and write the plan as a numbered list of simple sub-questions, one per line, in the form\n"
    "1. <first sub-question>\n2. <next sub-question, with #1 where it needs the answer of 1>\n"
    "Write #k where a sub-question needs the answer of sub-question k. Each sub-question asks for one "
    "fact; most questions need two to four. Do not state the final answer anywhere in the plan. Output "
    "only the list." + PLAN_DEMO)

STEP_SYSTEM = (
    "You write one step of a search agent that is solving a complex question. You know the correct "
    "answer and the supporting evidence, but the agent does not: its steps must only use what its "
    "searches have returned so far.\n"
    "Write the agent's thought between <think> and </think>: fill in the #k placeholders of the plan "
    "with answers already found, say which remaining sub-questions can be asked now and update the plan "
    "if needed. Never mention the final answer before a search has returned it.\n"
    "Then, if sub-questions remain, write them as <action>Search(\"question\")</action>, one "
    "Search(\"...\") per line: each a complete question ending with '?', with full entity names and no "
    "pronouns or placeholders. Put independent sub-questions (e.g. the two sides of a comparison) in "
    "the same action.\n"
    "If all needed facts are known, write <answer>short final answer</answer> instead of an action." + STEP_DEMO)

MAX_PLAN_STEPS = 12
SubQuestion = Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=600)]


class PlanSteps(BaseModel):
    """Eq. 3 as parsed from the planner's numbered list: 1 to ``MAX_PLAN_STEPS`` sub-questions."""

    model_config = ConfigDict(extra="forbid")

    steps: list[SubQuestion] = Field(min_length=1, max_length=MAX_PLAN_STEPS)


_PLAN_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:(?:step\s*)?\d+\s*[.):]|[-*])\s*(.+?)\s*$", re.IGNORECASE)


def parse_plan(text: str) -> list[str]:
    """The sub-questions of a numbered (or bulleted) plan."""
    out = []
    for line in text.replace("<think>", "").replace("</think>", "").splitlines():
        m = _PLAN_LINE.match(line)
        if m and m.group(1).strip():
            out.append(m.group(1).strip())
    return out


def evidence_block(item: EviItem, max_chars: int | None = None) -> str:
    return "\n".join(f"- {' '.join(e.split())}" for e in item.qa_evidence(max_chars))


def plan_messages(item: EviItem, max_chars: int | None = None) -> list[Message]:
    user = f"Question: {item.question}\nAnswer: {item.answer}\nSupporting evidence:\n{evidence_block(item, max_chars)}"
    return [Message(role="system", content=PLAN_SYSTEM), Message(role="user", content=user)]


def render_state(plan: list[str], iterations: list[IterationRecord]) -> str:
    """s_i: the plan and, per earlier iteration, its thought, sub-questions and their answers."""
    lines = ["Plan:"] + [f"{k}. {q}" for k, q in enumerate(plan, start=1)]
    for it in iterations:
        lines.append(f"Step {it.n} thought: {' '.join(it.thought.split())}")
        for q, a in zip(it.actions, it.observations, strict=False):
            lines.append(f"Search: {q}\nResult: {a}")
    if not iterations:
        lines.append("No searches yet.")
    return "\n".join(lines)


def step_messages(item: EviItem, plan: list[str], iterations: list[IterationRecord],
                  max_chars: int | None = None) -> list[Message]:
    user = (f"Question: {item.question}\nCorrect answer: {item.answer}\nSupporting evidence:\n"
            f"{evidence_block(item, max_chars)}\n\n{render_state(plan, iterations)}\n\nWrite step "
            f"{len(iterations) + 1}.")
    return [Message(role="system", content=STEP_SYSTEM), Message(role="user", content=user)]


def make_plan(llm: LLM, item: EviItem, cfg: EviPathConfig) -> PlanRecord:
    """Eq. 3 for one item (an unparseable plan, or a request over the context window, is a flagged
    record; any other LLM failure propagates)."""
    t0 = time.perf_counter()
    text, prov, err = call_text(llm, plan_messages(item, cfg.executor.max_fact_chars), stage="plans",
                                max_tokens=cfg.planner.max_tokens, temperature=cfg.planner.temperature)
    plan: list[str] = []
    if err is None:
        steps = parse_plan(text or "")
        try:
            plan = validate_structured({"steps": steps}, PlanSteps).steps
        except ParseError as exc:
            err = ("parse_error: no numbered sub-questions in the plan" if not steps else f"parse_error: {exc}")
    return PlanRecord(id=item.id, status="failed" if err else "ok", reason=err, plan=plan,
                      elapsed=time.perf_counter() - t0, provenance=prov)


def explore(planner: LLM, executor: LLM, item: EviItem, plan: PlanRecord,
            cfg: EviPathConfig) -> tuple[list[IterationRecord], list[SubAnswerRecord]]:
    """Eq. 4–5 iterations (each sub-question answered by f_QA) until the final answer, a failure or
    ``max_iterations``. The last record returned has ``last=True``."""
    iterations: list[IterationRecord] = []
    subs: list[SubAnswerRecord] = []
    for n in range(1, cfg.planner.max_iterations + 1):
        t0 = time.perf_counter()
        text, prov, err = call_text(planner, step_messages(item, plan.plan, iterations, cfg.executor.max_fact_chars),
                                    stage="iterations", max_tokens=cfg.planner.max_tokens,
                                    temperature=cfg.planner.temperature)
        parsed = parse_planner(text or "")
        rec = IterationRecord(id=f"{item.id}-i{n}", item_id=item.id, n=n, thought=parsed.thought,
                              actions=parsed.searches, answer=parsed.answer, provenance=prov)
        err = err or (f"parse_error: {parsed.error}" if parsed.error else None)
        if err is None and not parsed.thought:
            err = "parse_error: no <think> in the iteration"
        if err is None and parsed.searches:
            # the sub-questions of one action are independent: answered at once, read in order; the
            # first that fails as data ends the action (later answers dropped, as if never asked)
            answers = parallel_calls([partial(answer_subquestion, executor, q, item, cfg.executor)
                                      for q in parsed.searches], stop=lambda out: out[2] is not None,
                                     name="evipath-sub-answer")
            for j, (q, (sentence, sprov, serr)) in enumerate(zip(parsed.searches, answers, strict=False), start=1):
                subs.append(SubAnswerRecord(id=f"{item.id}-i{n}-q{j}", item_id=item.id, iteration=n, question=q,
                                            answer=sentence, status="failed" if serr else "ok", reason=serr,
                                            provenance=sprov))
                if serr:
                    err = f"sub_answer_failed: {serr}"
                    break
                rec.observations.append(sentence)
        rec.elapsed = time.perf_counter() - t0
        searched = sum(len(it.actions) for it in iterations) + len(parsed.searches)
        if err is None and searched > cfg.planner.max_searches:
            err = (f"no_final_answer: {searched} searches, over max_searches={cfg.planner.max_searches} (the agent "
                   "would be forced to answer)")
        if err is not None:
            iterations.append(rec.model_copy(update={"status": "failed", "reason": err, "last": True}))
            return iterations, subs
        if not parsed.searches:
            iterations.append(rec.model_copy(update={"last": True}))
            return iterations, subs
        iterations.append(rec)
    iterations[-1] = iterations[-1].model_copy(update={
        "last": True, "status": "failed",
        "reason": f"no_final_answer: no <answer> within max_iterations={cfg.planner.max_iterations}"})
    return iterations, subs


def failed_plan_path(item: EviItem, plan: PlanRecord) -> list[IterationRecord]:
    """The terminal record of an item whose plan is a flagged record (unparseable output, a request
    over the context window): the item is finished, rejected with that reason."""
    return [IterationRecord(id=f"{item.id}-i0", item_id=item.id, n=0, last=True, status="failed",
                            reason=f"plan_failed: {plan.reason}", provenance=Provenance(stage="iterations", model="rule"))]


__all__ = ["PlanSteps", "PLAN_SYSTEM", "STEP_SYSTEM", "parse_plan", "plan_messages", "step_messages", "render_state", "make_plan",
           "explore", "failed_plan_path"]
