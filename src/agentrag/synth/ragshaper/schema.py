"""Records of the RAGShaper stages (one JSONL file per stage, keyed by stable ids)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrag.records import Provenance, Record, ToolCall


class SeedRecord(Record):
    """A seed entity: the root of one information tree."""

    id: str
    entity: str
    source: str = ""
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="seeds", model="input"))


class DocRef(Record):
    """A document seen at a tree node: a KB passage (positive) or a generated distractor."""

    id: str
    title: str = ""
    text: str
    kb: str = "main"
    score: float | None = None
    distractor_type: str | None = None


class TreeNode(Record):
    """s_t = {action, intent, observation} (Eq. 2); the root (depth 0) holds the seed entity."""

    id: str
    parent: str | None = None
    depth: int = 0
    action: ToolCall | None = None
    intent: str = ""
    observation: str = ""
    docs: list[DocRef] = Field(default_factory=list)
    error: str | None = None
    repaired: list[str] = Field(default_factory=list,
                                description="what the curator left out or got wrong and a rule filled in")
    rejected: list[str] = Field(default_factory=list,
                                description="distractor documents the checks dropped: '<type>: <reason>'")
    provenance: Provenance | None = None


class InfoTree(Record):
    """The information tree grown from one seed entity."""

    id: str
    seed: str
    nodes: list[TreeNode] = Field(default_factory=list)
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    distractor_calls: int = 0
    elapsed: float = 0.0
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="explore"))

    def children(self, node_id: str) -> list[TreeNode]:
        return [n for n in self.nodes if n.parent == node_id]


class DistractorDoc(Record):
    """A document of the secondary KB K~ with its type, source passage and tree node."""

    id: str
    seed_id: str
    node_id: str
    distractor_type: str
    title: str
    text: str
    original_fact: str
    guideline: str = ""
    source_passage_id: str | None = None
    provenance: Provenance


class PathRecord(Record):
    """A root-to-leaf path chosen by Eq. 5 (score = number of documents on it)."""

    id: str
    seed_id: str
    seed: str
    node_ids: list[str]
    score: int
    rank: int
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="paths", model="rule:eq5"))


class QARecord(Record):
    """A synthesized (question, answer) with its reasoning steps; rejected ones keep the reason."""

    id: str
    path_id: str
    seed_id: str
    status: Literal["accepted", "rejected"]
    reason: str | None = None
    question: str = ""
    answer: str = ""
    reasoning_steps: list[dict[str, Any]] = Field(default_factory=list)
    negative_aspect: list[dict[str, Any]] = Field(default_factory=list)
    grounding: list[dict[str, Any]] = Field(default_factory=list,
                                            description="per reasoning step: the path document quoting its "
                                            "evidence (None: an invented hop) and the token containment")
    elapsed: float = 0.0
    provenance: Provenance


class FilterRecord(Record):
    """The Eq. 9 / §3.4 filter decision for one trajectory."""

    id: str
    qa_id: str
    prediction: str | None
    answer: str
    f1: float
    kept: bool
    reason: str | None = None
    provenance: Provenance = Field(default_factory=lambda: Provenance(stage="filter", model="rule:f1"))


class TagRecord(Record):
    """A behaviour tag by the LLM tagger (Fig. 4 left), beside the rule-based view."""

    id: str
    tag: str
    rule_tag: str = ""
    rationale: str = ""
    error: str | None = None
    provenance: Provenance


__all__ = ["SeedRecord", "DocRef", "TreeNode", "InfoTree", "DistractorDoc", "PathRecord", "QARecord", "FilterRecord",
           "TagRecord"]
