"""Records of the Tracer builder stages (one JSONL file per stage, keyed by stable ids).

A chain is identified by its seed atomic pair (``<doc id>-q<i>``); its hop ``h`` (h >= 2) is the
record ``<chain id>-h<h>`` of ``hop<h>.jsonl``. Every gate leaves a :class:`Check` (its verdict,
reason, the model's answer and raw outputs), so the exports can be audited against the verdicts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrag.records import Provenance, Record


class Check(Record):
    """One gate's verdict: ``passed`` is None when the gate was not run (an earlier gate failed)."""

    name: str
    passed: bool | None
    reason: str = ""
    answer: str | None = None
    em: float | None = None
    f1: float | None = None
    judge_score: int | None = None
    raw: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)


class DocRecord(Record):
    """A sampled KB passage with its LLM type/domain annotation (§3.1)."""

    id: str
    passage_id: str
    title: str
    text: str
    rank: int
    entity_type: str = ""
    domain: str = ""
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="sample"))


class AtomicPair(Record):
    """One atomic QA pair with the §3.2 filter checks (malformed, numeric, parametric, grounding)."""

    id: str
    question: str = ""
    answer: str = ""
    aliases: list[str] = Field(default_factory=list)
    status: Literal["accepted", "rejected"] = "rejected"
    reason: str | None = None
    checks: list[Check] = Field(default_factory=list)

    @property
    def golds(self) -> list[str]:
        return list(dict.fromkeys([self.answer, *self.aliases]))


class AtomicRecord(Record):
    """The atomic pairs written for one sampled document (status failed: generation unusable)."""

    id: str
    doc_id: str
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    pairs: list[AtomicPair] = Field(default_factory=list)
    calls: int = 0
    elapsed: float = 0.0
    cuts: int = 0  # documents shown cut to ``atomic.max_doc_chars`` (0: every document shown whole)
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="atomic"))


class Hop(Record):
    """One hop of a chain, as in the paper's Appendix A: the new atomic pair, its document, and
    the composed question and answer at this hop count, with every verification verdict."""

    level: int
    template: Literal["atomic", "inference", "comparison"]
    atomic_question: str
    atomic_answer: str
    atomic_aliases: list[str] = Field(default_factory=list)
    doc_id: str
    doc_title: str = ""
    doc_text: str = ""
    question: str
    answer: str
    aliases: list[str] = Field(default_factory=list)
    verified: bool = False
    reason: str | None = None
    checks: list[Check] = Field(default_factory=list)

    @property
    def golds(self) -> list[str]:
        return list(dict.fromkeys([self.answer, *self.aliases]))

    @property
    def atomic_golds(self) -> list[str]:
        return [g for g in dict.fromkeys([self.atomic_answer, *self.atomic_aliases]) if g.strip()]


class HopRecord(Record):
    """The extension of chain ``chain_id`` to ``level`` hops: the verified hop, or the failed tries."""

    id: str
    chain_id: str
    level: int
    status: Literal["verified", "failed"]
    reason: str | None = None
    hop: Hop | None = None
    attempts: list[Hop] = Field(default_factory=list)
    calls: int = 0
    elapsed: float = 0.0
    cuts: int = 0  # documents shown cut to ``atomic.max_doc_chars`` (0: every document shown whole)
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="hop"))


class Chain(Record):
    """A chain assembled from the stage files: hop 1 (the seed atomic pair) .. its verified top."""

    id: str
    doc_domain: str = ""
    hops: list[Hop]

    @property
    def depth(self) -> int:
        return len(self.hops)

    @property
    def template(self) -> str:
        return self.hops[1].template if len(self.hops) > 1 else "atomic"


__all__ = ["Check", "DocRecord", "AtomicPair", "AtomicRecord", "Hop", "HopRecord", "Chain"]
