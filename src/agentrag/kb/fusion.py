"""Fusion of ranked runs (BM25, dense) into one hybrid ranking.

A *run* is, per query, a list of ``(row, score)`` pairs, best first (what the indexes return).
Every function here takes ``runs: {method: [run of query 0, run of query 1, ...]}`` and returns one
fused run per query, sorted by fused score descending and, on equal scores, by row ascending (so
results are deterministic).

- :func:`rrf_fuse`: weighted reciprocal-rank fusion, ``sum_m w_m / (rrf_k + rank_m(d))``; uses
  ranks only.
- :func:`score_fuse`: weighted CombSUM of per-query normalised scores, ``sum_m w_m * norm_m(d)``,
  with ``minmax`` (``(s - min) / (max - min)``) or ``zscore`` (``(s - mean) / std``)
  normalisation over the run's own list. A document absent from a run gets that run's floor: 0
  for min-max (the value of its last listed document), the lowest listed z for z-score. A run whose
  scores are all equal carries no ordering: min-max gives its documents 1 (and absent ones 0),
  z-score gives every document 0.
- ``adaptive=True`` (any method): per-query weights. Each run's weight is multiplied by its
  :func:`confidence` on that query, the z-score of its own top score (how far the best hit stands
  above the rest of the list; clipped at 0). A run with one clear winner counts more than a run
  with a flat list; if every run is flat, the plain weights apply.

:func:`fuse` applies the method a :class:`~agentrag.kb.config.HybridConfig` names. Which method is
the default, and why, is measured by ``benchmarks/fusion.py`` (docs/kb.md, "Hybrid fusion").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from agentrag.kb.config import HybridConfig

Ranked = list[tuple[int, float]]


def _n_queries(runs: Mapping[str, Sequence[Ranked]]) -> int:
    sizes = {len(r) for r in runs.values()}
    if len(sizes) > 1:
        raise ValueError(f"runs cover different numbers of queries: { {m: len(r) for m, r in runs.items()} }")
    return sizes.pop() if sizes else 0


def _ranked(acc: dict[int, float]) -> Ranked:
    return sorted(acc.items(), key=lambda rs: (-rs[1], rs[0]))


def confidence(run: Ranked) -> float:
    """How far a run's top hit stands above its list: the z-score of the top score (0 if flat or empty)."""
    if not run:
        return 0.0
    scores = np.fromiter((s for _, s in run), dtype=np.float64, count=len(run))
    std = float(scores.std())
    return max((float(scores.max()) - float(scores.mean())) / std, 0.0) if std > 0 else 0.0


def _scales(runs: Mapping[str, Sequence[Ranked]], i: int, adaptive: bool) -> dict[str, float]:
    """Per-run weight factors of query ``i``: confidences, or 1 when not adaptive or all are 0."""
    conf = {m: confidence(per_query[i]) if adaptive else 1.0 for m, per_query in runs.items()}
    return conf if any(conf.values()) else dict.fromkeys(conf, 1.0)


def rrf_fuse(runs: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float], rrf_k: float, *,
             adaptive: bool = False) -> list[Ranked]:
    """Weighted reciprocal-rank fusion: score(d) = sum_m w_m / (rrf_k + rank_m(d)), ranks from 1.

    A method missing from ``weights`` has weight 1; ``adaptive``: each weight times the run's
    :func:`confidence` on the query."""
    fused: list[Ranked] = []
    for i in range(_n_queries(runs)):
        acc: dict[int, float] = {}
        scale = _scales(runs, i, adaptive)
        for method, per_query in runs.items():
            w = weights.get(method, 1.0) * scale[method]
            for rank, (row, _score) in enumerate(per_query[i], start=1):
                acc[row] = acc.get(row, 0.0) + w / (rrf_k + rank)
        fused.append(_ranked(acc))
    return fused


def _normalised(scores: np.ndarray, norm: str) -> tuple[np.ndarray, float]:
    if norm == "minmax":
        lo, hi = float(scores.min()), float(scores.max())
        return (np.ones_like(scores) if hi == lo else (scores - lo) / (hi - lo)), 0.0
    if norm == "zscore":
        std = float(scores.std())
        if std == 0.0:
            return np.zeros_like(scores), 0.0
        z = (scores - scores.mean()) / std
        return z, float(z.min())
    raise ValueError(f"unknown score normalisation {norm!r}; choose minmax or zscore")


def normalise(run: Ranked, norm: str) -> tuple[dict[int, float], float]:
    """``({row: normalised score}, floor)`` of one run; ``floor`` is the value of an absent row."""
    if not run:
        return {}, 0.0
    values, floor = _normalised(np.array([s for _, s in run], dtype=np.float64), norm)
    return {row: float(v) for (row, _), v in zip(run, values, strict=True)}, floor


def score_fuse(runs: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float], norm: str = "minmax", *,
               adaptive: bool = False) -> list[Ranked]:
    """Weighted CombSUM of normalised scores (see the module docstring); a method missing from
    ``weights`` has weight 1. ``adaptive``: weights scaled per query by each run's
    :func:`confidence`, the z-score of its top document."""
    if norm not in ("minmax", "zscore"):
        raise ValueError(f"unknown score normalisation {norm!r}; choose minmax or zscore")
    fused: list[Ranked] = []
    for i in range(_n_queries(runs)):
        parts: list[tuple[np.ndarray, np.ndarray, float, float]] = []  # rows, values, floor, weight
        scale = _scales(runs, i, adaptive)
        for m, per_query in runs.items():
            run = per_query[i]
            if not run:
                continue
            rows = np.fromiter((r for r, _ in run), dtype=np.int64, count=len(run))
            values, floor = _normalised(np.fromiter((s for _, s in run), dtype=np.float64, count=len(run)), norm)
            w = weights.get(m, 1.0) * scale[m]
            parts.append((rows, values, floor, w))
        if not parts:
            fused.append([])
            continue
        every = np.unique(np.concatenate([rows for rows, _, _, _ in parts]))
        acc = np.full(len(every), sum(w * floor for _, _, floor, w in parts))
        for rows, values, floor, w in parts:  # listed rows: their value instead of the floor
            acc[np.searchsorted(every, rows)] += w * (values - floor)
        order = np.lexsort((every, -acc))
        fused.append(list(zip(every[order].tolist(), acc[order].tolist(), strict=True)))
    return fused


def fuse(runs: Mapping[str, Sequence[Ranked]], config: HybridConfig) -> list[Ranked]:
    """The fused runs under ``config.fusion`` (with its weights, ``rrf_k``, ``adaptive``)."""
    if config.fusion == "rrf":
        return rrf_fuse(runs, config.weights, config.rrf_k, adaptive=config.adaptive)
    return score_fuse(runs, config.weights, config.fusion, adaptive=config.adaptive)


__all__ = ["rrf_fuse", "score_fuse", "normalise", "confidence", "fuse", "Ranked"]
