"""The per-item evaluation record (one line of ``<run>/results.jsonl``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentrag.records import Record, Trajectory


class EvalResult(Record):
    """One evaluated question: the agent's answer, its scores and its trajectory.

    ``steps`` counts the trajectory's retrieval calls (Tracer's steps: an answer call, e.g.
    ``Final_Answer``, is not a step); ``topk_per_step`` the top-k of each. ``judge`` is the LLM
    judge's 0/1/2 score (``None`` when no judge ran or it failed; ``judge_error`` says why).
    ``correct`` is the verdict the hop-aware diagnosis uses (judge pass at >= 1 when a judge is
    used, else EM); it is ``None`` when the judge failed (never replaced by EM).
    Lower-hop questions evaluated for MaxD carry ``parent_id`` and ``level``.
    """

    id: str
    question: str
    golden_answers: list[str]
    prediction: str | None = None
    hops: int | None = None
    em: float = 0.0
    f1: float = 0.0
    acc: float = 0.0
    judge: int | None = None
    judge_error: str | None = None
    recall: float | None = None
    correct: bool | None = False
    steps: int = 0
    topk_per_step: list[int] = Field(default_factory=list)
    finish_reason: str = "answered"
    parent_id: str | None = None
    level: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    trajectory: Trajectory | None = None


__all__ = ["EvalResult"]
