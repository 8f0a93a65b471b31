"""Retrieval recall on raw multi-hop files, with the question as the query.

Two numbers per method and k: ``all@k`` (fraction of questions whose gold passages are *all* in
the top k) and ``passage recall@k`` (mean fraction of a question's gold passages in the top k).

A gold passage is found in the KB by its id or, when the KB's ids differ (e.g. a FlashRAG corpus
such as wiki-18), by the hash of its normalised title and text. If most gold passages are in
neither form, the KB does not hold the file's corpus and the table would be meaningless: that is
a :class:`UserError`, not a recall of 0.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from agentrag.errors import UserError
from agentrag.kb.ingest import questions
from agentrag.kb.store import KnowledgeBase

log = logging.getLogger(__name__)

DEFAULT_KS = (2, 5, 10, 20)


def eval_recall(kb: KnowledgeBase, path: str | os.PathLike[str], *, methods: tuple[str, ...] = ("bm25", "dense",
                "hybrid"), ks: tuple[int, ...] = DEFAULT_KS, fmt: str = "auto",
                limit: int | None = None, max_missing: float = 0.5) -> dict[str, Any]:
    """Recall table ``{"questions": n, "missing_gold": m, "methods": {method: {k: {...}}}}``.

    Raises :class:`UserError` when more than ``max_missing`` of the gold passages are not in the KB.
    """
    items = [(qid, q, golds) for qid, q, golds in questions(path, fmt) if golds]
    if limit:
        items = items[:limit]
    if not items:
        raise UserError(f"{path}: no questions with gold passages to evaluate")
    wanted = {g for _, _, golds in items for g in golds}
    resolved = {g: g for g in kb.store.has_ids(wanted)}
    resolved.update(kb.store.ids_for_keys(wanted - set(resolved)))
    items = [(qid, q, [resolved.get(g, "\x00missing:" + g) for g in golds]) for qid, q, golds in items]
    total = sum(len(golds) for _, _, golds in items)
    missing = sum(1 for _, _, golds in items for g in golds if g.startswith("\x00missing:"))
    if missing > max_missing * total:
        raise UserError(f"{path}: {missing} of {total} gold passages are not in KB {kb.name!r} ({kb.directory}), "
                        "neither by id nor by title+text; evaluate with a KB built from this file's corpus "
                        "(e.g. `agentrag kb build` on the same raw file)")
    if missing:
        log.warning("%d gold passages of %s are not in the KB; their questions cannot reach full recall",
                    missing, path)
    kmax = max(ks)
    queries = [q for _, q, _ in items]
    table: dict[str, dict[int, dict[str, float]]] = {}
    for method in methods:
        hits = kb.search(queries, kmax, method=method)
        per_k: dict[int, dict[str, float]] = {}
        for k in ks:
            all_found = 0.0
            frac = 0.0
            for (_, _, golds), h in zip(items, hits, strict=True):
                top = {x.id for x in h[:k]}
                found = sum(1 for g in golds if g in top)
                all_found += float(found == len(golds))
                frac += found / len(golds)
            per_k[k] = {"all": all_found / len(items), "passage": frac / len(items)}
        table[method] = per_k
    return {"file": str(path), "questions": len(items), "missing_gold": missing, "methods": table}


__all__ = ["eval_recall", "DEFAULT_KS"]
