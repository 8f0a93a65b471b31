"""A searched annotation path as a ReasonRAG ``reason_ground`` trajectory (Algorithm 1's rounds),
with no LLM: per hop a Reasoning round that asks the hop's sub-question as a ``<query>``, and a
Grounding round over the documents the KB returned that quotes the supporting passage as
``<evidence>``; then a Reasoning round with ``<answer>``.

The SFT export (:func:`agentrag.export.protocol.reason_ground_chats`) rebuilds each round's request
with the agent's own prompts (:func:`agentrag.agents.reason_ground.stage_messages`), so the data
trains exactly what ``reason_ground`` sends, and what the ReasonRAG MCTS (``agentrag synth
reasonrag``) expands: an SFT policy for the tree. Evaluate and search with the same ``top_k`` and
``doc_chars`` as the teacher. The reasoning sentences are templates around the annotation
(docs/loop.md); the observation is the retrieval tool's text, the one the agent sees.
"""

from __future__ import annotations

from agentrag.agents.reason_ground import SEARCH_ACTION
from agentrag.agents.tools import clip_text
from agentrag.protocol import neutralize_tags
from agentrag.records import QAItem, Step, ToolCall, Trajectory
from agentrag.synth.annotated.gates import supporting_hits
from agentrag.synth.annotated.teacher import SearchedHop


def query_step(i: int, searched: list[SearchedHop]) -> str:
    """The Reasoning round of hop ``i``: what is known so far, then the hop's ``<query>``."""
    sh = searched[i]
    if i == 0:
        return f"I need to find this first: <query>{sh.hop.query}</query>"
    return f"So {searched[i - 1].hop.answer} answers the last query. Next: <query>{sh.hop.query}</query>"


def evidence_step(sh: SearchedHop, doc_chars: int | None) -> str:
    """The Grounding round of one hop: the first retrieved passage of the supporting page that
    states the answer in what the agent is shown (the gates kept only such paths)."""
    found = supporting_hits(sh, doc_chars)
    hit = sh.hits[found[0]] if found else None
    text = clip_text(" ".join(hit.text.split()), doc_chars) if hit is not None else ""
    quote = neutralize_tags(f"{hit.title}: {text}") if hit is not None else ""
    return (f"Based on the query, the relevant evidence is <evidence>{quote} "
            f"The answer to the query is {sh.hop.answer}.</evidence>").replace("<evidence> ", "<evidence>")


def answer_step(answer: str) -> str:
    """The last Reasoning round: the answer, as the forced-answer instruction asks for it."""
    return f"The evidence answers every query. So the answer is <answer>{answer}</answer>"


def rg_trajectory(item: QAItem, searched: list[SearchedHop], doc_chars: int | None = None) -> Trajectory:
    """The ``reason_ground`` trajectory of a searched path (query and evidence rounds per hop, then
    the answer round); the observations are the searched hops' own."""
    traj = Trajectory(id=item.id, question=item.question, agent="reason_ground", model="human-annotation")
    for i, sh in enumerate(searched):
        y_query = query_step(i, searched)
        call = ToolCall(id=f"call_{len(traj.steps)}", name=SEARCH_ACTION, arguments={"query": sh.hop.query})
        traj.steps.append(Step(thought=y_query, raw=y_query, action=call, observation=sh.observation,
                               hits=sh.hits, error=sh.error))
        y_evidence = evidence_step(sh, doc_chars)
        traj.steps.append(Step(thought=y_evidence, raw=y_evidence))
    answer = item.golden_answers[0]
    y_answer = answer_step(answer)
    traj.steps.append(Step(thought=y_answer, raw=y_answer))
    traj.answer, traj.finish_reason = answer, "answered"
    traj.metadata = {"teacher": "human-annotation", "source": item.metadata.get("source"),
                     "hops": [h.hop.query for h in searched]}
    return traj


__all__ = ["query_step", "evidence_step", "answer_step", "rg_trajectory"]
