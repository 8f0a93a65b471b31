"""Several KBs searched as one (per-KB k)."""

from __future__ import annotations

from agentrag.errors import UserError
from agentrag.kb.base import Retriever, apply_threshold
from agentrag.records import Hit


class MultiRetriever:
    """Search several retrievers; each hit keeps the name of the KB it came from.

    ``search`` merges the top ``k`` of every KB by score; ``search_split`` takes a different k
    per KB (RAGShaper's constrained navigation reads R(K, k-2) ∪ R(K~, 2)).
    """

    def __init__(self, retrievers: dict[str, Retriever]) -> None:
        if not retrievers:
            raise UserError("MultiRetriever needs at least one retriever")
        self.retrievers = dict(retrievers)

    def _tagged(self, name: str, hits: list[Hit]) -> list[Hit]:
        return [h if h.kb == name else h.model_copy(update={"kb": name}) for h in hits]

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        merged: list[list[Hit]] = [[] for _ in queries]
        for name, r in self.retrievers.items():
            for i, hits in enumerate(r.search(queries, k, threshold)):
                merged[i].extend(self._tagged(name, hits))
        return [apply_threshold(hits, k, threshold) for hits in merged]

    def search_split(self, query: str, per_kb_k: dict[str, int], threshold: float | None = None) -> list[Hit]:
        """The union of the top ``per_kb_k[name]`` hits of each named KB, best score first."""
        unknown = sorted(set(per_kb_k) - set(self.retrievers))
        if unknown:
            raise UserError(f"unknown KB name(s) {unknown}; known: {sorted(self.retrievers)}")
        out: list[Hit] = []
        seen: set[tuple[str, str]] = set()
        for name, k in per_kb_k.items():
            if k <= 0:
                continue
            for h in self._tagged(name, self.retrievers[name].search([query], k, threshold)[0]):
                if (h.kb, h.id) not in seen:
                    seen.add((h.kb, h.id))
                    out.append(h)
        return sorted(out, key=lambda h: h.score, reverse=True)


__all__ = ["MultiRetriever"]
