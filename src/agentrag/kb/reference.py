"""A ``--kb`` reference (DESIGN §5): a knowledge-base directory, or ``http(s)://host:port`` of a
Search-R1-style retrieval server. :func:`resolve_retriever` turns one into a retriever;
:func:`check_retriever` is the pre-flight of a retrieval server (its ``/health``, with the token),
run once per run where the run resolves its KB."""

from __future__ import annotations

import os
from typing import Any

from agentrag.kb.base import Retriever


def is_kb_url(ref: Any) -> bool:
    """Whether ``ref`` names a retrieval server (not a KB directory)."""
    return isinstance(ref, str) and ref.startswith(("http://", "https://"))


def resolve_retriever(ref: str) -> Retriever:
    """A KB directory, or ``http(s)://host:port`` of a Search-R1-style server (token from
    ``AGENTRAG_KB_TOKEN``)."""
    if is_kb_url(ref):
        from agentrag.kb.remote import TOKEN_ENV, RemoteRetriever

        return RemoteRetriever(ref, token=os.environ.get(TOKEN_ENV) or None)
    from agentrag.kb.store import KnowledgeBase

    return KnowledgeBase.load(ref)


def check_retriever(retriever: Any) -> None:
    """The pre-flight of a retriever: a retrieval server must answer ``GET /health`` (token
    included), now rather than item by item; a KB on disk needs none."""
    check = getattr(retriever, "health", None)
    if callable(check):
        check()


__all__ = ["resolve_retriever", "check_retriever", "is_kb_url"]
