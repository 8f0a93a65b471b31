"""Knowledge base: ingestion, BM25, dense and hybrid retrieval, save/load, HTTP server and client.

Heavy libraries (bm25s, faiss, sentence-transformers, fastapi) are imported only when used.
"""

from agentrag.kb.base import Embedder, Retriever, apply_threshold
from agentrag.kb.embedders import load_embedder
from agentrag.kb.multi import MultiRetriever, RemoteRetriever, resolve_retriever
from agentrag.kb.store import KBConfig, KnowledgeBase

__all__ = ["Embedder", "Retriever", "apply_threshold", "KnowledgeBase", "KBConfig", "MultiRetriever",
           "RemoteRetriever", "resolve_retriever", "load_embedder"]
