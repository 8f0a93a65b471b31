"""Configuration of the RAGShaper synthesizer.

The field defaults are the small ``demo`` sizes; the paper's §4.1 settings ship as the ``paper``
preset (``presets/paper.yaml``, ``--preset paper``). Paper values are in the field descriptions.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import Field

from agentrag.config import Config
from agentrag.errors import UserError
from agentrag.llm.adaptive import ITEMS_IN_FLIGHT_HELP, default_items_in_flight

PRESETS = ("paper", "demo")

DISTRACTOR_TYPES = ("doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy")


class CuratorConfig(Config):
    """InfoCurator tree exploration (§3.1.1)."""

    max_depth: int = Field(default=4, ge=1, description="stop expanding at this depth (paper: 30)")
    p_branch: float = Field(default=0.5, ge=0.0, le=1.0, description="p_b: probability of two children")
    branch_depths: int = Field(default=2, ge=0, description="p_b applies on depths < this; 0 after (paper: 2)")
    top_k: int = Field(default=3, ge=1, description="default top_k of the dense retrieval tool")
    max_top_k: int = Field(default=5, ge=1, description="cap on the top_k the curator may ask for")
    threshold: float | None = Field(default=None, description="Eq. 4 tau; depends on the embedder (paper: 0.8 for E5)")
    method: str = Field(default="dense", description="retrieval method of the curator's tool")
    max_tokens: int = 256
    temperature: float = 0.7
    max_observation_chars: int = Field(default=600, ge=50, description="per-document text shown back to the curator")


class DistractorConfig(Config):
    """Distractor curation tool (Table 1)."""

    enabled: bool = True
    docs_per_call: int = Field(default=2, ge=1, le=5)
    min_calls: int = Field(default=3, ge=0, description="calls the curator is asked to make per seed")
    min_docs: int = Field(default=5, ge=0, description="documents the curator is asked to create per seed")
    max_tokens: int = 384
    temperature: float = 0.8


class QAConfig(Config):
    """QA synthesis and rejection (§3.2)."""

    min_hops: int = Field(default=3, ge=1, description="grounded hops required (Fig. 12: >= 3 dependent hops)")
    evidence_match: float = Field(default=0.8, ge=0.0, le=1.0,
                                  description="a reasoning step's evidence is grounded when this share of its "
                                  "tokens is found, in order, in one document of the path (token containment)")
    max_answer_words: int = Field(default=8, ge=1, description="longer answers are rejected (answer_too_long); "
                                  "Fig. 12 asks for '<= one sentence, one entity, ideally a short phrase'")
    max_tokens: int = 512
    temperature: float = 0.7


class ElicitConfig(Config):
    """Behavior elicitation with constrained navigation (§3.3, Eq. 8)."""

    agent: str = "react"
    prompt: Literal["rollout", "evaluation"] = Field(
        default="rollout", description="react teacher's system prompt: 'rollout' (Fig. 13: may fall back to its "
        "own knowledge; tool query_knowledge_base_dense as Fig. 10) or 'evaluation' (Fig. 14: admits a miss)")
    top_k: int = Field(default=5, ge=3, description="k of Eq. 8 (k-2 from K, 2 from K~)")
    k_distractor: int = Field(default=2, ge=1)
    p_e: float = Field(default=0.5, ge=0.0, le=1.0, description="Eq. 8 distractive probability (paper: 0.5)")
    threshold: float | None = Field(default=None, description="Eq. 4 tau of the teacher's retrieval (paper: 0.8)")
    method: str = Field(default="dense", description="retrieval method of the teacher's tool on K and K~")
    max_steps: int = Field(default=6, ge=1, description="teacher turns; the paper's trajectories reach 40+ "
                           "tool calls (Fig. 3), so the paper preset allows 50")
    max_tokens: int = 256
    temperature: float = 0.0


class RagShaperConfig(Config):
    """Everything ``agentrag synth ragshaper`` reads; override any key with ``--set``."""

    seed: int = Field(default=0, description="seeds tree branching, Eq. 8 draws and every LLM sampling call")
    concurrency: int | None = Field(default=None, ge=1, description=ITEMS_IN_FLIGHT_HELP)
    curator: CuratorConfig = Field(default_factory=CuratorConfig)
    distractors: DistractorConfig = Field(default_factory=DistractorConfig)
    paths_per_tree: int = Field(default=2, ge=1, description="m of §3.1.2")
    qa: QAConfig = Field(default_factory=QAConfig)
    elicit: ElicitConfig = Field(default_factory=ElicitConfig)
    f1_threshold: float = Field(default=0.9, ge=0.0, le=1.0, description="keep trajectories with F1 > this (§3.4)")
    tag_behaviours: bool = True
    malformed_turns: Literal["reject", "keep"] = Field(default="reject",
                                 description="a kept trajectory with a malformed assistant turn: 'reject' drops "
                                 "it from the SFT export (counted in the funnel); 'keep' exports it as is")
    export: bool = True


def check_kb_methods(cfg: RagShaperConfig, kb: Any, where: str = "--kb") -> None:
    """Pre-flight, before any LLM call: the retrieval methods the configuration reads K with
    (``curator.method``, ``elicit.method``) exist and ``kb`` can serve them (a KB built with
    ``--method bm25`` has no dense index). Raises :class:`UserError` naming the ``--set`` keys."""
    from agentrag.kb.config import METHODS

    roles = (("curator.method", cfg.curator.method), ("elicit.method", cfg.elicit.method))
    for key, method in roles:
        if method not in METHODS:
            raise UserError(f"{key}={method!r} is no retrieval method; pass --set {key}=" + "|".join(METHODS))
    if getattr(kb, "dense", True) is not None:
        return
    dense = [(key, method) for key, method in roles if method != "bm25"]
    if dense:
        used = ", ".join(f"{key}={method}" for key, method in dense)
        fix = " ".join(f"--set {key}=bm25" for key, _ in dense)
        raise UserError(f"{where} {getattr(kb, 'directory', kb)}: this knowledge base has no dense index (it was "
                        f"built with `agentrag kb build --method bm25`), but the configuration reads it with "
                        f"dense retrieval ({used}). Pass {fix} to read it with BM25, or rebuild the KB with "
                        "`agentrag kb build --method hybrid` (or dense)")


def load_preset(name: str) -> dict[str, Any]:
    """The settings of a shipped preset (``paper``: §4.1 of the paper; ``demo``: small sizes)."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    text = resources.files("agentrag.synth.ragshaper").joinpath("presets", f"{name}.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise UserError(f"preset {name!r}: the top level must be a mapping")
    return data


def preset_base(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The preset ``name`` with the command line's ``values`` (None = not given) on top, and the
    preset's name recorded; ``--config`` and ``--set`` then apply over this."""
    from agentrag.config import _deep_merge

    given = {k: v for k, v in values.items() if v is not None}
    return _deep_merge(load_preset(name), {**given, "preset": name})


class RagShaperRunConfig(RagShaperConfig):
    """The synthesizer settings plus what the command line names: KB, seeds and the LLMs."""

    preset: str = Field(default="demo", description="the preset the settings started from (recorded)")
    kb: str | None = Field(default=None, description="knowledge-base directory (K)")
    seeds: str | None = Field(default=None, description="file of seed entities, or N to sample N KB titles")
    llm: str = Field(default="embedded", description="curator / QA-writer / distractor-writer LLM reference")
    teacher: str | None = Field(default=None, description="teacher LLM reference (default: llm)")
    tagger: str | None = Field(default=None, description="behaviour-tagger LLM reference (default: llm)")

    def items_in_flight(self) -> int:
        """``concurrency``, or its default for the LLMs named (:func:`~agentrag.llm.adaptive.default_items_in_flight`)."""
        return self.concurrency or default_items_in_flight(self.llm, self.teacher, self.tagger)


__all__ = ["DISTRACTOR_TYPES", "PRESETS", "check_kb_methods", "load_preset", "preset_base", "RagShaperRunConfig", "CuratorConfig", "DistractorConfig", "QAConfig",
           "ElicitConfig", "RagShaperConfig"]
