"""The retrieval seams (DESIGN §3): :class:`Embedder` and :class:`Retriever`.

They live below both ``agentrag.agents`` (which reads a Retriever through its tools and
navigation policies) and ``agentrag.kb`` (which implements them), so neither area imports the
other for a type. ``agentrag.kb.base`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from agentrag.records import Hit

EmbedKind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dim)``."""

    dim: int

    def embed(self, texts: list[str], kind: EmbedKind = "query") -> np.ndarray: ...


@runtime_checkable
class Retriever(Protocol):
    """Batch-first search. RAGShaper Eq. 4: keep hits with score > threshold, then the top k."""

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> Sequence[list[Hit]]: ...


def apply_threshold(hits: list[Hit], k: int, threshold: float | None) -> list[Hit]:
    """Eq. 4 of RAGShaper: hits with score strictly above ``threshold`` (if any), then the top ``k``."""
    kept = hits if threshold is None else [h for h in hits if h.score > threshold]
    kept = sorted(kept, key=lambda h: h.score, reverse=True)
    return kept[:k]


__all__ = ["Embedder", "Retriever", "EmbedKind", "apply_threshold"]
