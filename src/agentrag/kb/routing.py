"""Method routing: a retriever whose searches all use one method of a knowledge base.

RAGShaper's teacher reads its KB with one method (``dense``, the paper's tool), and so does
constrained navigation served over HTTP (``agentrag kb serve --navigation constrained``): both
KBs of Eq. 8 must be read with the same method so that merged scores are comparable.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Protocol

from agentrag.errors import RetrievalError, RunError
from agentrag.kb.base import Retriever
from agentrag.records import Hit


class ErrorWatch(Protocol):
    """Something told of every retrieval failure before it propagates (e.g. RAGShaper's
    ``OutageWatch``, which remembers the first outage of a teacher rollout)."""

    def note(self, exc: RunError) -> None: ...


class MethodRetriever:
    """A retriever whose searches use one method (e.g. ``dense``, as the paper's tool) when the
    underlying retriever takes a ``method`` argument (a KnowledgeBase); otherwise passes through.
    With a ``watch``, a RetrievalError is noted there before it propagates."""

    def __init__(self, inner: Retriever, method: str | None, watch: ErrorWatch | None = None) -> None:
        self.inner = inner
        self.method = method if method and "method" in inspect.signature(inner.search).parameters else None
        self.watch = watch

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> Sequence[list[Hit]]:
        try:
            if self.method is None:
                return self.inner.search(queries, k, threshold=threshold)
            return self.inner.search(queries, k, threshold=threshold, method=self.method)  # type: ignore[call-arg]
        except RetrievalError as exc:
            if self.watch is not None:
                self.watch.note(exc)
            raise


__all__ = ["MethodRetriever", "ErrorWatch"]
