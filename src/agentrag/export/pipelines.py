"""SFT chats of the non-agentic baselines (``naive``, ``standard_rag``, ``ircot``, ``iter_retgen``) as
they talked to the model: the pipeline, not the model, decides when to retrieve, so a retrieval is
no turn the model wrote and no tool is offered. Each LLM call is one single-turn chat: its request,
rebuilt from the trajectory with the agent's own message builders, then the model's output as the
pipeline kept it (the step's thought: IRCoT's first sentence, Iter-RetGen's generation, the
answering reply). Calls whose output was unusable (an error on the step) are not exported.

- ``naive``: the closed-book request; ``standard_rag``: the documents of the question's
  retrieval and the question (:func:`~agentrag.agents.standard_rag.rag_messages`);
- ``iter_retgen``: round t's request is ``rag_messages`` over the documents of the retrieval
  before it;
- ``ircot``: step i's request (:func:`~agentrag.agents.ircot.ircot_messages`) holds the paragraphs
  gathered so far (each retrieval's new passages, by id, up to the agent's ``max_paragraphs``,
  recorded in ``metadata``), the question and the sentences kept so far.
"""

from __future__ import annotations

from agentrag.records import Hit, Message, Step, Trajectory

#: agents whose trajectories are exported by this module
PIPELINE_AGENTS = ("naive", "standard_rag", "ircot", "iter_retgen")


def _llm_step(step: Step) -> bool:
    """A step that holds an LLM call's output (a retrieval with the question has none)."""
    return step.raw is not None


def _chat(request: list[Message], step: Step) -> list[Message]:
    return [*request, Message(role="assistant", content=step.thought)]


def _ircot_chats(traj: Trajectory) -> list[list[Message]]:
    from agentrag.agents.ircot import ircot_messages

    cap = traj.metadata.get("max_paragraphs")
    doc_chars = traj.metadata.get("doc_chars")
    paragraphs: list[Hit] = []
    sentences: list[str] = []
    chats = []

    def gather(hits: list[Hit]) -> None:
        seen = {h.id for h in paragraphs}
        for h in hits:
            if isinstance(cap, int) and len(paragraphs) >= cap:
                return
            if h.id not in seen:
                seen.add(h.id)
                paragraphs.append(h)

    if not traj.steps:
        return []
    gather(traj.steps[0].hits)  # the question's retrieval; every later step is one LLM call
    for step in traj.steps[1:]:
        request = ircot_messages(traj.question, paragraphs, sentences,
                                 doc_chars=doc_chars if isinstance(doc_chars, int) else None)
        if step.error is None and step.thought.strip():
            chats.append(_chat(request, step))
        if step.thought.strip():  # the sentence kept (an empty reply keeps none)
            sentences.append(step.thought)
        if step.action is not None:
            gather(step.hits)
    return chats


def pipeline_chats(traj: Trajectory) -> list[list[Message]]:
    """One chat per usable LLM call of a baseline's trajectory (module docstring)."""
    from agentrag.agents.naive import NAIVE_SYSTEM, QUESTION_USER
    from agentrag.agents.standard_rag import rag_messages
    from agentrag.agents.tools import NO_DOCUMENTS

    if traj.agent == "ircot":
        return _ircot_chats(traj)
    chats = []
    documents = NO_DOCUMENTS
    for step in traj.steps:
        if _llm_step(step) and step.error is None:
            request = ([Message(role="system", content=NAIVE_SYSTEM),
                        Message(role="user", content=QUESTION_USER.format(question=traj.question))]
                       if traj.agent == "naive" else rag_messages(traj.question, documents))
            chats.append(_chat(request, step))
        if step.action is not None:
            documents = step.observation if step.observation is not None else NO_DOCUMENTS
    return chats


__all__ = ["PIPELINE_AGENTS", "pipeline_chats"]
