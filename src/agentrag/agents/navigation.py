"""Navigation policies: which knowledge base(s) each retrieval call of an agent reads.

``PlainNavigation`` reads one retriever. ``ConstrainedNavigation`` is RAGShaper's constrained
navigation (Eq. 8): it mixes documents of a secondary distractor KB (K~) into the results so a
teacher agent is forced to meet them, without ever telling the agent which KB a document came
from. Both are stateless apart from the random generator; the step number and the previous
step's hits are passed in by the retrieval tool, so one policy can serve many agents at once.
"""

from __future__ import annotations

import random
import threading
from typing import Any, Protocol

from agentrag.errors import UserError
from agentrag.protocols import Retriever
from agentrag.records import Hit

#: ``Hit.metadata`` key set on every hit the constrained policy took from the distractor KB.
ORIGIN_KEY = "navigation_origin"
DISTRACTOR = "distractor"


class _RandomSource(Protocol):
    def random(self) -> float: ...


def is_distractor(hit: Hit) -> bool:
    """Whether ``hit`` was taken from the distractor KB by :class:`ConstrainedNavigation`."""
    return hit.metadata.get(ORIGIN_KEY) == DISTRACTOR


def _search_one(retriever: Retriever, query: str, k: int, threshold: float | None) -> list[Hit]:
    if k <= 0:
        return []
    results = retriever.search([query], k, threshold=threshold)
    return list(results[0]) if results else []


class PlainNavigation:
    """Every call reads ``retriever``: R(K, k) (RAGShaper Eq. 4 with the optional ``threshold``)."""

    def __init__(self, retriever: Retriever, threshold: float | None = None) -> None:
        self.retriever = retriever
        self.threshold = threshold

    def search(self, query: str, k: int, step: int, previous_hits: list[Hit]) -> list[Hit]:
        return _search_one(self.retriever, query, k, self.threshold)


class ConstrainedNavigation:
    """RAGShaper Eq. 8, with ``k_distractor`` = 2 by default::

        D_t = R(K, k-2) ∪ R(K~, 2)   if t = 1
              R(K, k)                if K~ ∩ D_{t-1} ≠ ∅
              R(K, k-2) ∪ R(K~, 2)   with probability p_e
              R(K, k)                otherwise

    Distractor hits keep their own ``kb`` name and metadata (e.g. the distractor type) and are
    tagged with ``metadata["navigation_origin"] = "distractor"``; the merged list is ordered by
    score, so their position does not give them away. ``rng`` is a seed or any object with a
    ``random()`` method (``random.Random``, ``numpy.random.Generator``); draws are locked, so the
    policy may be shared by threads.
    """

    def __init__(self, main: Retriever, distractor: Retriever, k_distractor: int = 2, p_e: float = 0.5,
                 rng: _RandomSource | int | None = None, threshold: float | None = None) -> None:
        if not 0.0 <= p_e <= 1.0:
            raise UserError(f"ConstrainedNavigation: p_e={p_e!r} must lie in [0, 1]")
        if k_distractor < 1:
            raise UserError(f"ConstrainedNavigation: k_distractor={k_distractor!r} must be at least 1")
        self.main = main
        self.distractor = distractor
        self.k_distractor = k_distractor
        self.p_e = p_e
        self.threshold = threshold
        self.rng: _RandomSource = rng if rng is not None and not isinstance(rng, int) else random.Random(rng)
        self._lock = threading.Lock()

    def reads_distractor(self, step: int, previous_hits: list[Hit]) -> bool:
        """The Eq. 8 decision for step ``step`` (1-based) given the previous step's hits."""
        if step <= 1:
            return True
        if any(is_distractor(h) for h in previous_hits):
            return False
        with self._lock:
            return self.rng.random() < self.p_e

    def search(self, query: str, k: int, step: int, previous_hits: list[Hit]) -> list[Hit]:
        if not self.reads_distractor(step, previous_hits):
            return _search_one(self.main, query, k, self.threshold)
        k_tilde = min(self.k_distractor, k)  # never more than k documents in all (Eq. 4)
        main_hits = _search_one(self.main, query, k - k_tilde, self.threshold)
        tagged = []
        for h in _search_one(self.distractor, query, k_tilde, self.threshold):
            meta: dict[str, Any] = {**h.metadata, ORIGIN_KEY: DISTRACTOR}
            tagged.append(h.model_copy(update={"metadata": meta}))
        return sorted(main_hits + tagged, key=lambda h: h.score, reverse=True)


__all__ = ["PlainNavigation", "ConstrainedNavigation", "is_distractor", "ORIGIN_KEY", "DISTRACTOR"]
