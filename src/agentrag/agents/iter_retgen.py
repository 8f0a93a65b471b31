"""``iter_retgen``: Iter-RetGen (Shao et al., Findings of EMNLP 2023), ``iterations`` rounds of
generation-augmented retrieval and retrieval-augmented generation.

Round 1 retrieves ``top_k`` documents with the question; round t > 1 with the question, a space and
the whole generation of round t - 1 (FlashRAG's query). Every round the model sees the answering
request of ``standard_rag`` (:func:`~agentrag.agents.standard_rag.rag_messages`: that round's
documents, then the question) and generates; the prediction is
:func:`~agentrag.agents.baselines.short_answer` of the last round's generation.

Steps: the question's retrieval (no LLM call); each generation but the last with the retrieval it
led to (thought: the generation; action: the search with question + generation); the last
generation without an action. An unparseable generation leaves the next query the question alone
and, in the last round, ends with ``parse_error``.
"""

from __future__ import annotations

from agentrag.agents.baselines import SEARCH_ACTION, answer_turn, retrieval_step
from agentrag.agents.config import IterRetGenConfig
from agentrag.agents.loop import BaseAgent
from agentrag.agents.standard_rag import rag_messages
from agentrag.records import QAItem, Trajectory


def next_query(question: str, generation: str) -> str:
    """The query of the next round: the question and the previous generation."""
    generation = " ".join(generation.split())
    return f"{question} {generation}" if generation else question


class IterRetGenAgent(BaseAgent):
    """Retrieve with the question plus the previous generation, generate; ``iterations`` times."""

    name = "iter_retgen"
    config_class = IterRetGenConfig
    config: IterRetGenConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        tool = self.new_tool(SEARCH_ACTION, traj=traj, neutralize=True)
        documents = retrieval_step(self, tool, item.question, traj).observation
        for _ in range(self.config.iterations - 1):
            messages = rag_messages(item.question, documents)
            turn = self.chat(messages)
            generation = turn.text.strip() if turn.error is None else ""
            query = next_query(item.question, generation)
            documents = retrieval_step(self, tool, query, traj, turn, thought=generation).observation
            if turn.error is not None:
                traj.steps[-1].error = turn.error
        answer_turn(self, rag_messages(item.question, documents), traj)


__all__ = ["IterRetGenAgent", "next_query"]
