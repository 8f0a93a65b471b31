"""The retrieval seams (DESIGN §3), re-exported from :mod:`agentrag.protocols` (their home, below
both ``agentrag.agents`` and ``agentrag.kb``)."""

from __future__ import annotations

from agentrag.protocols import Embedder, EmbedKind, Retriever, apply_threshold

__all__ = ["Embedder", "Retriever", "EmbedKind", "apply_threshold"]
