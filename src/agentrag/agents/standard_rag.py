"""``standard_rag``: retrieve-then-read, the "Standard RAG" row of ReasonRAG's Table 2 (FlashRAG's
sequential pipeline): retrieve ``top_k`` documents with the question, answer in one LLM call.

Steps: a retrieval with the question (no LLM call), then the answering turn, which sees
:data:`RAG_SYSTEM` and :data:`RAG_USER` (the documents, then the question); the prediction is
:func:`~agentrag.agents.baselines.short_answer` of its reply.
"""

from __future__ import annotations

from agentrag.agents.baselines import SEARCH_ACTION, answer_turn, retrieval_step
from agentrag.agents.config import StandardRagConfig
from agentrag.agents.loop import BaseAgent
from agentrag.records import Message, QAItem, Trajectory

RAG_SYSTEM = (
    "Answer the question with the help of the documents you are given. Reply with the answer alone: a "
    "few words such as a name, a place, a date, a number, or yes or no. Do not explain."
)
RAG_USER = "Documents:\n{documents}\n\nQuestion: {question}"


def rag_messages(question: str, documents: str) -> list[Message]:
    """The answering request of ``standard_rag`` (and of every Iter-RetGen round)."""
    return [Message(role="system", content=RAG_SYSTEM),
            Message(role="user", content=RAG_USER.format(documents=documents, question=question))]


class StandardRagAgent(BaseAgent):
    """One retrieval with the question, one answer."""

    name = "standard_rag"
    config_class = StandardRagConfig
    config: StandardRagConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        tool = self.new_tool(SEARCH_ACTION, traj=traj, neutralize=True)
        result = retrieval_step(self, tool, item.question, traj)
        answer_turn(self, rag_messages(item.question, result.observation), traj)


__all__ = ["StandardRagAgent", "RAG_SYSTEM", "RAG_USER", "rag_messages"]
