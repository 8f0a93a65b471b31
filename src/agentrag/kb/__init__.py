"""Knowledge base: ingestion, BM25, dense and hybrid retrieval, save/load, HTTP server and client.

Heavy libraries (bm25s, faiss, sentence-transformers, fastapi) are imported only when used.
"""

from agentrag.kb.base import Embedder, Retriever, apply_threshold
from agentrag.kb.build import build_kb
from agentrag.kb.embedders import load_embedder
from agentrag.kb.multi import MultiRetriever
from agentrag.kb.reference import check_retriever, is_kb_url, resolve_retriever
from agentrag.kb.remote import RemoteRetriever
from agentrag.kb.routing import MethodRetriever
from agentrag.kb.store import KBConfig, KnowledgeBase

__all__ = ["Embedder", "Retriever", "apply_threshold", "KnowledgeBase", "KBConfig", "MultiRetriever",
           "RemoteRetriever", "resolve_retriever", "check_retriever", "is_kb_url", "load_embedder", "build_kb", "MethodRetriever", "serve_navigation"]


def __getattr__(name: str) -> object:
    if name == "serve_navigation":  # the server module is imported only when asked for
        from agentrag.kb.serving import serve_navigation

        return serve_navigation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
