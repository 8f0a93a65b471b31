"""Configuration of the AgenticRAGTracer builder (paper values in the descriptions; see docs/tracer.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrag.config import Config
from agentrag.errors import UserError
from agentrag.llm.adaptive import ITEMS_IN_FLIGHT_HELP, default_items_in_flight

DOMAINS = ("art", "literature", "music", "film_tv", "history", "geography", "science", "technology",
           "sports", "politics", "military", "religion", "business", "other")


class SamplingConfig(Config):
    """§3.1 document sampling, overlap removal and type annotation."""

    min_chars: int = Field(default=200, ge=0, description="skip passages shorter than this")
    oversample: float = Field(default=2.0, ge=1.0, description="annotate docs*oversample candidates when a "
                              "--max-per-type cap is set, so the cap can be met")
    max_per_type: int | None = Field(default=None, ge=1, description="cap of documents per annotated domain")
    max_tokens: int = 96


class AtomicConfig(Config):
    """§3.2 atomic QA generation and its filters."""

    pairs_per_doc: int = Field(default=2, ge=1, description="n: QA pairs the LLM writes per document")
    max_answer_words: int = Field(default=8, ge=1, description="longer answers are malformed")
    max_doc_chars: int | None = Field(default=None, ge=100, description="document text shown to the LLMs: "
                                      "None = whole documents; else a window of this size per hop, around the "
                                      "passage that states the hop's fact (each cut counted)")
    max_tokens: int = 320
    temperature: float = 0.7


class ComposeConfig(Config):
    """§3.3 related-document retrieval and 2-hop (and later) composition."""

    retrieve_k: int = Field(default=5, ge=1, description="documents retrieved per query")
    candidates_per_hop: int = Field(default=2, ge=1, description="related documents tried per extension")
    method: str = Field(default="hybrid", description="KB search method (bm25 | dense | hybrid)")
    extension_templates: list[Literal["inference", "comparison"]] = Field(
        default_factory=lambda: ["inference"],  # type: ignore[arg-type]
        description="templates allowed beyond 2 hops (paper: 'appending additional inference steps')")
    max_tokens: int = 320
    temperature: float = 0.7


class VerifyConfig(Config):
    """§3.3 three-stage verification and the answer checks of §3.2."""

    max_answer_tokens: int = 48
    audit_max_tokens: int = 160


class TracerConfig(Config):
    """Everything ``agentrag synth tracer`` reads; override any key with ``--set``."""

    seed: int = 0
    docs: int = Field(default=10, ge=1, description="N documents sampled from the KB")
    max_hops: int = Field(default=4, ge=2, le=4, description="longest chain built (paper: 4)")
    concurrency: int | None = Field(default=None, ge=1, description=ITEMS_IN_FLIGHT_HELP)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    atomic: AtomicConfig = Field(default_factory=AtomicConfig)
    compose: ComposeConfig = Field(default_factory=ComposeConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)


#: starting settings: ``default`` (today's small sizes) and ``paper`` (the released code's
#: retrieval settings: ``topk=10``, ``gen_qa_num=5`` pairs per document, ``every_hop_qa_num=15``
#: compositions tried per hop, ``num_hop=4``)
PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "paper": {"max_hops": 4, "atomic": {"pairs_per_doc": 5},
              "compose": {"retrieve_k": 10, "candidates_per_hop": 15}},
}


def preset_base(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The preset ``name`` with the command line's ``values`` (None = not given) on top and the
    preset's name recorded; ``--config`` and ``--set`` then apply over this."""
    from agentrag.config import _deep_merge

    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    given = {k: v for k, v in values.items() if v is not None}
    return _deep_merge(PRESETS[name], {**given, "preset": name})


class TracerRunConfig(TracerConfig):
    """The builder settings plus what the command line names: KB, LLMs and excluded benchmarks."""

    preset: str = Field(default="default", description="the preset the settings started from (recorded)")

    kb: str | None = Field(default=None, description="knowledge-base directory to sample documents from")
    llm: str = Field(default="embedded", description="generator / answerer / auditor LLM reference")
    judge: str | None = Field(default=None, description="0/1/2 judge LLM reference (default: llm)")
    exclude: list[str] = Field(default_factory=list, description="benchmark files whose titles are removed")

    def items_in_flight(self) -> int:
        """``concurrency``, or its default for the LLMs named (:func:`~agentrag.llm.adaptive.default_items_in_flight`)."""
        return self.concurrency or default_items_in_flight(self.llm, self.judge)


__all__ = ["PRESETS", "preset_base", "DOMAINS", "SamplingConfig", "AtomicConfig", "ComposeConfig", "VerifyConfig",
           "TracerConfig", "TracerRunConfig"]
