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
- ``zscore`` with ``adaptive=True``: per-query weights. Each run's weight is multiplied by its
  *confidence* on that query, the z-score of its own top document (how far the best hit stands
  above the rest of the list; clipped at 0). A run with one clear winner counts more than a run
  with a flat list.

:func:`fuse` applies the method a :class:`~agentrag.kb.config.HybridConfig` names. Which method is
the default, and why, is measured by ``benchmarks/fusion.py`` (docs/kb.md, "Hybrid fusion").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrag.kb.config import HybridConfig

Ranked = list[tuple[int, float]]
FUSIONS = ("rrf", "minmax", "zscore")


def _n_queries(runs: Mapping[str, Sequence[Ranked]]) -> int:
    sizes = {len(r) for r in runs.values()}
    if len(sizes) > 1:
        raise ValueError(f"runs cover different numbers of queries: { {m: len(r) for m, r in runs.items()} }")
    return sizes.pop() if sizes else 0


def _ranked(acc: dict[int, float]) -> Ranked:
    return sorted(acc.items(), key=lambda rs: (-rs[1], rs[0]))


def rrf_fuse(runs: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float], rrf_k: float) -> list[Ranked]:
    """Weighted reciprocal-rank fusion: score(d) = sum_m w_m / (rrf_k + rank_m(d)), ranks from 1.

    A method missing from ``weights`` has weight 1."""
    fused: list[Ranked] = []
    for i in range(_n_queries(runs)):
        acc: dict[int, float] = {}
        for method, per_query in runs.items():
            w = weights.get(method, 1.0)
            for rank, (row, _score) in enumerate(per_query[i], start=1):
                acc[row] = acc.get(row, 0.0) + w / (rrf_k + rank)
        fused.append(_ranked(acc))
    return fused


def normalise(run: Ranked, norm: str) -> tuple[dict[int, float], float]:
    """``({row: normalised score}, floor)`` of one run; ``floor`` is the value of an absent row."""
    if not run:
        return {}, 0.0
    scores = [s for _, s in run]
    if norm == "minmax":
        lo, hi = min(scores), max(scores)
        if hi == lo:
            return {row: 1.0 for row, _ in run}, 0.0
        return {row: (s - lo) / (hi - lo) for row, s in run}, 0.0
    if norm == "zscore":
        mean = sum(scores) / len(scores)
        std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
        if std == 0.0:
            return {row: 0.0 for row, _ in run}, 0.0
        z = {row: (s - mean) / std for row, s in run}
        return z, min(z.values())
    raise ValueError(f"unknown score normalisation {norm!r}; choose minmax or zscore")


def score_fuse(runs: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float], norm: str = "minmax", *,
               adaptive: bool = False) -> list[Ranked]:
    """Weighted CombSUM of normalised scores (see the module docstring); a method missing from
    ``weights`` has weight 1. ``adaptive`` (z-score only): weights scaled per query by each run's
    confidence, the z-score of its top document."""
    if adaptive and norm != "zscore":
        raise ValueError("adaptive weights need zscore normalisation")
    fused: list[Ranked] = []
    for i in range(_n_queries(runs)):
        normed = {m: normalise(list(per_query[i]), norm) for m, per_query in runs.items()}
        eff: dict[str, float] = {}
        for m, (values, _floor) in normed.items():
            w = weights.get(m, 1.0)
            if adaptive:
                w *= max(max(values.values(), default=0.0), 0.0)
            eff[m] = w
        rows = {row for values, _ in normed.values() for row in values}
        acc = {row: sum(eff[m] * values.get(row, floor) for m, (values, floor) in normed.items()) for row in rows}
        fused.append(_ranked(acc))
    return fused


def fuse(runs: Mapping[str, Sequence[Ranked]], config: HybridConfig) -> list[Ranked]:
    """The fused runs under ``config.fusion`` (with its weights, ``rrf_k``, ``adaptive``)."""
    if config.fusion == "rrf":
        return rrf_fuse(runs, config.weights, config.rrf_k)
    return score_fuse(runs, config.weights, config.fusion, adaptive=config.adaptive)


__all__ = ["rrf_fuse", "score_fuse", "normalise", "fuse", "FUSIONS", "Ranked"]
