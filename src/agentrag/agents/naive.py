"""``naive``: closed-book generation, the "Naïve Generation" row of ReasonRAG's Table 2 (FlashRAG's
zero-shot run): one LLM call with the question and no retrieval.

Turns: one. The model sees :data:`NAIVE_SYSTEM` and ``Question: <question>``; the prediction is
:func:`~agentrag.agents.baselines.short_answer` of its reply.
"""

from __future__ import annotations

from agentrag.agents.baselines import answer_turn
from agentrag.agents.config import NaiveConfig
from agentrag.agents.loop import BaseAgent
from agentrag.records import Message, QAItem, Trajectory

NAIVE_SYSTEM = (
    "Answer the question from what you know. Reply with the answer alone: a few words such as a name, "
    "a place, a date, a number, or yes or no. Do not explain."
)
QUESTION_USER = "Question: {question}"


class NaiveAgent(BaseAgent):
    """Closed-book generation: the question in, the short answer out."""

    name = "naive"
    config_class = NaiveConfig
    config: NaiveConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        messages = [Message(role="system", content=NAIVE_SYSTEM),
                    Message(role="user", content=QUESTION_USER.format(question=item.question))]
        answer_turn(self, messages, traj)


__all__ = ["NaiveAgent", "NAIVE_SYSTEM", "QUESTION_USER"]
