"""A searched annotation path as EviPath ``planner_executor`` conversations (Eq. 7's two roles),
with no LLM: the planner's multi-turn chat (one ``Search`` per annotated hop, the executor's
answer sentences as observations, then ``<answer>``) and one executor chat per hop (the
sub-question, the passages the KB returned as indexed evidence, ``<select>`` of the supporting
passages, a templated answer sentence).

Deviation from EviPath: there an LLM writes the thoughts, plans and answer sentences; here they
are templates around the annotators' sub-questions and answers (docs/loop.md). The prompts, the
turn formats and the evidence rendering are the agent's (:mod:`agentrag.agents.pe_protocol`), so
the data trains the protocol ``planner_executor`` runs (evaluate it with the same ``top_k`` and
``max_passage_chars`` = the teacher's ``doc_chars``).
"""

from __future__ import annotations

from typing import Any

from agentrag.agents.pe_protocol import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    executor_user,
    parse_executor,
    parse_planner,
    render_executor_turn,
    render_observation,
    render_planner_turn,
)
from agentrag.agents.planner_executor import passage_text
from agentrag.records import Message, Provenance
from agentrag.synth.annotated.gates import supporting_hits
from agentrag.synth.annotated.teacher import SearchedHop
from agentrag.synth.evipath.schema import IterationRecord, PlanRecord, SelectionRecord
from agentrag.synth.evipath.support import sub_answer_problem


def answer_sentence(sh: SearchedHop) -> str:
    """The executor's declarative answer for one hop (a template around the annotation)."""
    return f'The answer to "{sh.hop.query}" is {sh.hop.answer}.'


def supporting_indices(sh: SearchedHop, max_chars: int | None = None) -> list[int]:
    """Indices (in the evidence list) of the retrieved passages of the hop's supporting page that
    state its answer in the part the executor is shown (``max_chars``)."""
    return supporting_hits(sh, max_chars, view=passage_text)


def executor_problem(sh: SearchedHop, max_chars: int | None = None) -> str | None:
    """Why the executor chat of ``sh`` would fail EviPath's ``sub_answer_support`` gate (its answer
    sentence not stated by the passages it selects, as that gate reads them: a page that gives
    only the nationality, "French" for "France", or only an abbreviation does not state it), or None."""
    select = supporting_indices(sh, max_chars)
    if not select:
        return "no passage states the answer"
    return sub_answer_problem(answer_sentence(sh), [passage_text(sh.hits[i], max_chars) for i in select],
                              sh.hop.query)


def planner_conversation(question: str, answer: str, searched: list[SearchedHop]) -> list[Message]:
    """System I_p, ``Question: q``; per hop a think + ``Search`` turn and its observation; the answer."""
    msgs = [Message(role="system", content=PLANNER_SYSTEM), Message(role="user", content=f"Question: {question}")]
    for i, sh in enumerate(searched):
        if i == 0:
            thought = f"I split the question into sub-questions. First I need: {sh.hop.query}"
        else:
            thought = f"I found that {searched[i - 1].hop.answer} answers the last search. Next I need: {sh.hop.query}"
        msgs.append(Message(role="assistant", content=render_planner_turn(thought, searches=[sh.hop.query])))
        msgs.append(Message(role="user", content=render_observation([answer_sentence(sh)])))
    final = f"The observations answer every sub-question, so the answer is {answer}."
    msgs.append(Message(role="assistant", content=render_planner_turn(final, answer=answer)))
    return msgs


def executor_conversation(sh: SearchedHop, max_chars: int | None = None) -> list[Message]:
    """System I_e, the sub-question with the retrieved passages, think / select / answer."""
    select = supporting_indices(sh, max_chars)
    evidence = [passage_text(h, max_chars) for h in sh.hits]
    titles = ", ".join(sh.hits[i].title for i in select)
    thought = f"The question asks: {sh.hop.query} The evidence about {titles} states the answer, {sh.hop.answer}."
    return [Message(role="system", content=EXECUTOR_SYSTEM),
            Message(role="user", content=executor_user(sh.hop.query, evidence)),
            Message(role="assistant", content=render_executor_turn(thought, select, answer_sentence(sh)))]




def evipath_records(planner: list[dict[str, Any]], execs: list[list[dict[str, Any]]], item_id: str,
                     ) -> tuple[PlanRecord, list[IterationRecord], list[SelectionRecord]]:
    """EviPath's stage records (plan, iterations, selections) of one exported planner chat and its
    executor chats, read back with the agent's own parsers: what EviPath's gates check."""
    prov = Provenance(stage="annotated")
    its: list[IterationRecord] = []
    turns = [m for m in planner if m["role"] == "assistant"]
    obs = [m["content"] for m in planner[2:] if m["role"] == "user"]
    for n, t in enumerate(turns, start=1):
        p = parse_planner(t["content"])
        o = [obs[n - 1].removeprefix("Observation:\n")] if p.searches else []
        its.append(IterationRecord(id=f"{item_id}-i{n}", item_id=item_id, n=n, thought=p.thought, actions=p.searches,
                                   observations=o, answer=p.answer, last=n == len(turns), provenance=prov))
    sels = []
    for k, chat in enumerate(execs):
        user = chat[1]["content"]
        question = user.split("\n", 1)[0].removeprefix("Question: ")
        evidence = [line.split("] ", 1)[1] for line in user.splitlines() if line.startswith("[")]
        ex = parse_executor(chat[2]["content"])
        sels.append(SelectionRecord(id=f"{item_id}-s{k}", item_id=item_id, question=question, answer=ex.answer or "",
                                    evidence=evidence, gold_positions=list(ex.select or []), thought=ex.thought,
                                    supporting=[evidence[i] for i in ex.select or []], select=ex.select,
                                    provenance=prov))
    return PlanRecord(id=item_id, plan=[], provenance=prov), its, sels


__all__ = ["answer_sentence", "supporting_indices", "executor_problem", "planner_conversation", "executor_conversation",
           "evipath_records"]
