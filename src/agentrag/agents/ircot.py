"""``ircot``: IRCoT (Trivedi et al., ACL 2023), interleaving chain-of-thought sentences with retrieval.

1. Retrieve ``top_k`` paragraphs with the question.
2. Up to ``max_iter`` times: the model sees :data:`IRCOT_SYSTEM` and :data:`IRCOT_USER` (every
   paragraph gathered so far, the question, the sentences so far) and writes the next sentence;
   only the first sentence of its output is kept. A sentence containing "answer is" ends the
   run; its answer is the prediction (:func:`~agentrag.agents.baselines.short_answer`).
   Otherwise the sentence is the next query: ``top_k`` paragraphs are retrieved with it and the
   new ones added to the pool, at most ``max_paragraphs`` in all (later new ones are dropped).
   No retrieval follows the last allowed sentence (no call would read it).
3. ``max_iter`` sentences without "answer is": finish ``max_steps``, no prediction (the chain is
   never taken for an answer).

Steps: the question's retrieval (no LLM call); each sentence with the retrieval it led to (the
thought is the sentence, the action the search with it); the answering sentence without an action.
An empty or unparseable output is a step with ``error`` that spends an iteration;
``max_format_errors`` in a row end the run with ``parse_error``.
"""

from __future__ import annotations

from agentrag.agents.baselines import ANSWER_IS, SEARCH_ACTION, first_sentence, retrieval_step, short_answer
from agentrag.agents.config import IrcotConfig
from agentrag.agents.loop import BaseAgent
from agentrag.agents.tools import format_documents
from agentrag.records import Hit, Message, QAItem, Trajectory

IRCOT_SYSTEM = (
    "You answer a question that may need several facts, reasoning one step at a time over the documents "
    "you are given. Reply with exactly one new sentence that continues the reasoning so far, stating one "
    "fact that brings you closer to the answer. Once the reasoning is enough to answer, reply with: "
    "So the answer is: <short answer>."
)
IRCOT_USER = "Documents:\n{documents}\n\nQuestion: {question}\n\nReasoning so far: {reasoning}\n\nNext sentence:"
NO_REASONING = "(none yet)"


def ircot_messages(question: str, paragraphs: list[Hit], sentences: list[str], *,
                   doc_chars: int | None = None) -> list[Message]:
    """The request of one IRCoT step: the paragraphs gathered, the question, the chain so far."""
    user = IRCOT_USER.format(documents=format_documents(paragraphs, neutralize=True, doc_chars=doc_chars),
                             question=question, reasoning=" ".join(sentences) or NO_REASONING)
    return [Message(role="system", content=IRCOT_SYSTEM), Message(role="user", content=user)]


class IrcotAgent(BaseAgent):
    """IRCoT: reason one sentence, retrieve with it, repeat."""

    name = "ircot"
    config_class = IrcotConfig
    config: IrcotConfig

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH_ACTION, traj=traj, neutralize=True)
        traj.metadata["max_paragraphs"] = cfg.max_paragraphs  # the SFT export rebuilds each request
        if cfg.doc_chars is not None:
            traj.metadata["doc_chars"] = cfg.doc_chars
        paragraphs: list[Hit] = []
        self._gather(paragraphs, retrieval_step(self, tool, item.question, traj).hits)
        sentences: list[str] = []
        errors_in_a_row = 0
        for i in range(cfg.max_iter):
            messages = ircot_messages(item.question, paragraphs, sentences, doc_chars=cfg.doc_chars)
            turn = self.chat(messages)
            traj.messages = [*messages, Message(role="assistant", content=turn.text)]
            sentence = first_sentence(turn.text) if turn.error is None else ""
            if not sentence:
                traj.steps.append(self.step(turn, error=turn.error or "empty reply"))
                errors_in_a_row += 1
                if errors_in_a_row >= cfg.max_format_errors:
                    traj.finish_reason = "parse_error"
                    return
                continue
            errors_in_a_row = 0
            sentences.append(sentence)
            if ANSWER_IS.search(sentence):
                answer = short_answer(sentence)
                traj.steps.append(self.step(turn, thought=sentence, error=None if answer else "no answer after "
                                            "'answer is'"))
                traj.answer = answer
                traj.finish_reason = "answered" if answer else "no_answer"
                return
            if i == cfg.max_iter - 1:
                traj.steps.append(self.step(turn, thought=sentence))
                break
            self._gather(paragraphs, retrieval_step(self, tool, sentence, traj, turn, thought=sentence).hits)
        traj.finish_reason = "max_steps"

    def _gather(self, paragraphs: list[Hit], hits: list[Hit]) -> None:
        """Add the hits not gathered yet (by passage id), up to ``max_paragraphs`` in all."""
        seen = {h.id for h in paragraphs}
        for h in hits:
            if len(paragraphs) >= self.config.max_paragraphs:
                return
            if h.id not in seen:
                seen.add(h.id)
                paragraphs.append(h)


__all__ = ["IrcotAgent", "IRCOT_SYSTEM", "IRCOT_USER", "NO_REASONING", "ircot_messages"]
