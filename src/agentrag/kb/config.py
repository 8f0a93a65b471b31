"""Configuration of a knowledge base (stored in its params.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrag.config import Config

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


class HybridConfig(Config):
    """Weighted RRF. Defaults chosen by ``benchmarks/kb_defaults.py`` so that hybrid all@10 is at
    least the best single method on both the HotpotQA dev and MuSiQue train shared files, with
    either embedder backend (see docs/kb.md)."""

    weights: dict[str, float] = Field(default_factory=lambda: {"bm25": 1.0, "dense": 1.5})
    rrf_k: float = 10.0
    depth: int = 100


class KBConfig(Config):
    """How a knowledge base is built and searched (stored in its params.json)."""

    name: str = "main"
    method: Method = "hybrid"
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)


__all__ = ["KBConfig", "EmbedderConfig", "IndexConfig", "BM25Config", "HybridConfig", "METHODS", "Method"]
