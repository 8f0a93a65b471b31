"""Knowledge base: ingestion, BM25, dense and hybrid retrieval, save/load, HTTP server and client."""

from agentrag.kb.base import Embedder, Retriever, apply_threshold

__all__ = ["Embedder", "Retriever", "apply_threshold"]
