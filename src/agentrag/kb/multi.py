"""Several KBs searched as one (per-KB k), a client of Search-R1-style retrieval servers, and
``resolve_retriever`` for ``--kb`` references (a KB directory or ``http://host:port``)."""

from __future__ import annotations

import os
from typing import Any

from agentrag.errors import RetrievalError, UserError
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


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG ``"Title\\ntext"`` -> (title, text), unquoting a quoted title."""
    title, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


class RemoteRetriever:
    """Retriever protocol over HTTP against any Search-R1-style ``POST /retrieve`` server."""

    def __init__(self, url: str, token: str | None = None, *, kb: str = "remote", timeout: float = 60.0,
                 client: Any = None) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.endpoint = self.url if self.url.endswith("/retrieve") else self.url + "/retrieve"
        self.kb = kb
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = client or httpx.Client(timeout=timeout, headers=headers)
        self._headers = headers

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        import httpx

        if not queries:
            return []
        payload = {"queries": list(queries), "topk": int(k), "return_scores": True}
        try:
            resp = self.client.post(self.endpoint, json=payload, headers=self._headers)
        except httpx.HTTPError as exc:
            raise RetrievalError(f"retrieval server {self.endpoint} unreachable: {exc}", is_retryable=True) from exc
        if resp.status_code >= 400:
            raise RetrievalError(f"retrieval server {self.endpoint} answered {resp.status_code}: {resp.text[:300]}",
                                 is_retryable=resp.status_code >= 500 or resp.status_code == 429)
        try:
            result = resp.json()["result"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RetrievalError(f"retrieval server {self.endpoint} sent no 'result' list: {resp.text[:300]}") from exc
        if not isinstance(result, list) or len(result) != len(queries):
            raise RetrievalError(f"retrieval server {self.endpoint} returned {type(result).__name__} "
                                 f"for {len(queries)} queries")
        return [apply_threshold([self._hit(item, rank) for rank, item in enumerate(per_q)], k, threshold)
                for per_q in result]

    def _hit(self, item: Any, rank: int) -> Hit:
        if isinstance(item, dict) and "document" in item:
            doc, score = item["document"], float(item.get("score", 0.0))
        else:
            doc, score = item, -float(rank)
        if not isinstance(doc, dict) or "contents" not in doc:
            raise RetrievalError(f"retrieval server {self.endpoint} sent a document without 'contents': {doc!r:.200}")
        title, text = split_contents(str(doc["contents"]))
        from agentrag.kb.ingest import passage_id

        pid = str(doc.get("id", "")) or passage_id(title, text)
        return Hit(id=pid, title=title, text=text, score=score, method="remote", kb=self.kb)


def resolve_retriever(ref: str) -> Retriever:
    """A KB directory, or ``http(s)://host:port`` of a Search-R1-style server (token from
    ``AGENTRAG_KB_TOKEN``)."""
    if ref.startswith(("http://", "https://")):
        return RemoteRetriever(ref, token=os.environ.get("AGENTRAG_KB_TOKEN") or None)
    from agentrag.kb.store import KnowledgeBase

    return KnowledgeBase.load(ref)


__all__ = ["MultiRetriever", "RemoteRetriever", "resolve_retriever", "split_contents"]
