"""Configuration of a knowledge base (stored in its params.json)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, model_validator

from agentrag.config import Config

log = logging.getLogger(__name__)

Method = Literal["bm25", "dense", "hybrid"]
METHODS = ("bm25", "dense", "hybrid")


class EmbedderConfig(Config):
    """``model``: a sentence-transformers name or path (None = the embedded all-MiniLM-L6-v2)."""

    model: str | None = None
    # torch fp32 by measurement: onnx-int8 lost 5 points dense all@10 on MuSiQue (docs/kb.md,
    # benchmarks/kb_defaults.py); it stays available as the faster option
    backend: Literal["onnx-int8", "torch"] = "torch"
    batch_size: int = 32
    max_seq_length: int | None = None
    pooling: Literal["mean", "cls"] | None = None  # None: the model's own (sentence-transformers config)
    query_prefix: str | None = None  # None: by model family (e5 "query: ", bge's instruction, else "")
    passage_prefix: str | None = None


class IndexConfig(Config):
    type: Literal["flat", "hnsw", "ivfpq"] = "flat"
    hnsw_m: int = 32
    ef_search: int = 128
    nlist: int | None = None
    pq_m: int | None = None
    nprobe: int = 16


class BM25Config(Config):
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    # retrieval: auto = bm25s's numba backend when numba is installed (it is, with the kb extra), else
    # numpy; $AGENTRAG_BM25_BACKEND overrides auto. Same scores either way (docs/kb.md, BM25)
    backend: Literal["auto", "numpy", "numba"] = "auto"


#: the hybrid settings every KB was saved with before ``fusion`` existed (weighted RRF, tuned on the
#: shared HotpotQA dev and MuSiQue train_100 files; they lost to BM25 on other data)
FORMER_HYBRID: dict[str, Any] = {"weights": {"bm25": 1.0, "dense": 1.5}, "rrf_k": 10.0}


class HybridConfig(Config):
    """How ``hybrid`` search fuses the BM25 and dense runs (top ``depth`` of each), see
    :mod:`agentrag.kb.fusion`. ``fusion``: ``rrf`` (weighted reciprocal-rank fusion with ``rrf_k``),
    ``minmax`` or ``zscore`` (weighted sum of per-query normalised scores); ``adaptive`` scales each
    run's weight per query by its confidence (the z-score of its top score). The defaults were chosen by
    ``benchmarks/fusion.py``: tuned on one shared dataset, validated on the others (docs/kb.md).

    A hybrid block without ``fusion`` but with ``rrf_k`` (every KB saved before fusion methods
    existed, or a config naming only RRF settings) is an RRF config and keeps plain RRF; if it holds
    exactly the former defaults (:data:`FORMER_HYBRID`), which no one chose, it gets today's
    defaults instead.
    """

    fusion: Literal["rrf", "minmax", "zscore"] = "zscore"
    weights: dict[str, float] = Field(default_factory=lambda: {"bm25": 0.4, "dense": 0.6})
    rrf_k: float = 60.0  # used by fusion=rrf only
    adaptive: bool = True
    depth: int = 100

    @model_validator(mode="before")
    @classmethod
    def _saved_before_fusion(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "fusion" in data or "rrf_k" not in data:
            return data
        if data.get("weights") == FORMER_HYBRID["weights"] and data["rrf_k"] == FORMER_HYBRID["rrf_k"]:
            log.info("hybrid settings are the former defaults (%s); using today's defaults", FORMER_HYBRID)
            return {k: v for k, v in data.items() if k not in FORMER_HYBRID}
        return {"adaptive": False, **data, "fusion": "rrf"}


class KBConfig(Config):
    """How a knowledge base is built and searched (stored in its params.json)."""

    name: str = "main"
    method: Method = "hybrid"
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)


__all__ = ["KBConfig", "EmbedderConfig", "IndexConfig", "BM25Config", "HybridConfig", "FORMER_HYBRID", "METHODS",
           "Method"]
