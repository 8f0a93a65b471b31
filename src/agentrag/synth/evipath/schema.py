"""Records of the EviPath stages (one JSONL file per stage, keyed by stable ids)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrag.records import Message, Provenance, Record

Status = Literal["ok", "failed"]


class Fact(Record):
    """One element ζ of F: a supporting sentence (HotpotQA, 2Wiki) or paragraph (MuSiQue)."""

    idx: int
    title: str = ""
    text: str

    def render(self, max_chars: int | None = None) -> str:
        text = self.text if max_chars is None else self.text[:max_chars]
        return f"{self.title}: {text}" if self.title else text


class EviItem(Record):
    """d_train = (q, a, F, F̂): ``gold`` holds the indices of F̂ inside ``facts`` (F)."""

    id: str
    question: str
    answer: str
    answers: list[str] = Field(default_factory=list, description="the answer and its aliases")
    facts: list[Fact] = Field(default_factory=list)
    gold: list[int] = Field(default_factory=list)
    hops: int = 2
    source: str = ""
    file: str = ""
    line: int = 0
    status: Literal["ok", "skipped"] = "ok"
    reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="items", model="input"))

    def gold_facts(self) -> list[Fact]:
        return [self.facts[i] for i in self.gold]

    def triples(self) -> list[list[str]]:
        """2Wiki ``evidences`` (subject, relation, object); [] for the other datasets."""
        return [t for t in self.metadata.get("evidences", []) if isinstance(t, list) and len(t) == 3]

    def gold_views(self, max_chars: int | None = None) -> list[list[str]]:
        """Per fact of F̂: its text, then the 2Wiki evidence triples about its page (subject = title),
        each as one line "subject — relation — object" (they resolve the sentence's pronouns)."""
        return [[f.render(max_chars)] + [" — ".join(t) for t in self.triples() if t[0] == f.title]
                for f in self.gold_facts()]

    def qa_evidence(self, max_chars: int | None = None) -> list[str]:
        """The evidence f_QA answers from: F̂ and every 2Wiki evidence triple."""
        return [f.render(max_chars) for f in self.gold_facts()] + [" — ".join(t) for t in self.triples()]


class PlanRecord(Record):
    """Eq. 3: the plan P = {q_1..q_n} (placeholders #k stand for earlier answers)."""

    id: str
    status: Status = "ok"
    reason: str | None = None
    plan: list[str] = Field(default_factory=list)
    elapsed: float = 0.0
    provenance: Provenance


class SubAnswerRecord(Record):
    """Eq. 6, first part: a_i = f_QA(q_i, F̂), one declarative sentence (or, in deductive mode, the
    agent executor's answer over the retrieved passages in ``context``)."""

    id: str
    item_id: str
    iteration: int
    question: str
    answer: str = ""
    status: Status = "ok"
    reason: str | None = None
    context: list[str] = Field(default_factory=list, description="deductive: the passages the executor saw")
    executor_output: str | None = None
    provenance: Provenance


class IterationRecord(Record):
    """Eq. 4–5: thought R_i and action Q_i (sub-questions) or the final answer; ``last`` marks the end
    of the item's path (finished or failed)."""

    id: str
    item_id: str
    n: int
    thought: str = ""
    actions: list[str] = Field(default_factory=list)
    observations: list[str] = Field(default_factory=list)
    answer: str | None = None
    last: bool = False
    status: Status = "ok"
    reason: str | None = None
    elapsed: float = 0.0
    provenance: Provenance


class SelectionRecord(Record):
    """Eq. 6, second and third parts: F̂_i by cosine > τ (argmax fallback) and the executor's
    thought over the shuffled, indexed F."""

    id: str
    item_id: str
    question: str
    answer: str
    evidence: list[str] = Field(default_factory=list, description="F shuffled and rendered, as indexed")
    gold_positions: list[int] = Field(default_factory=list, description="positions of F̂_i in ``evidence``")
    similarities: list[float] = Field(default_factory=list, description="cos(φ(ζ), φ(a_i)) for ζ in F̂")
    fallback: bool = False
    repaired: bool = Field(default=False, description="Eq. 6 chose evidence that does not state the sub-answer; "
                           "the fact of F̂ that states it was chosen instead")
    supporting: list[str] = Field(default_factory=list, description="F̂_i in full (with its 2Wiki triples): "
                                  "what the sub-answer must be supported by")
    thought: str = ""
    select: list[int] | None = None
    status: Status = "ok"
    reason: str | None = None
    provenance: Provenance


class GateRecord(Record):
    """Our quality gates on one item's path: each check and the reasons of the failed ones."""

    id: str
    passed: bool
    checks: dict[str, bool] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    prediction: str | None = None
    f1: float = 0.0
    n_subquestions: int = 0
    hops: int = 0
    executor_kept: list[str] = Field(default_factory=list, description="sub-answer ids whose selection passed")
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="gates", model="rule"))


class ConversationRecord(Record):
    """Eq. 7 training conversation: planner (multi-turn) or executor (single-turn)."""

    id: str
    item_id: str
    role: Literal["planner", "executor"]
    messages: list[Message]
    kept: bool = True
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="conversations", model="rule"))


__all__ = ["Fact", "EviItem", "PlanRecord", "SubAnswerRecord", "IterationRecord", "SelectionRecord", "GateRecord",
           "ConversationRecord", "Status"]
