"""Training-token budgets: how many SFT steps on one dataset see as many tokens as a given number
of steps on another (the loop's EviPath and ReasonRAG arms train on the same items as the react
arm, in other record shapes, with the react arm's budget; docs/loop.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def matched_steps(reference: Sequence[int], data: Sequence[int], reference_steps: int, batch: int) -> dict[str, Any]:
    """Steps on ``data`` (token lengths of its records) whose expected tokens, steps x batch x mean
    record length, equal those of ``reference_steps`` steps on ``reference`` (``-1``: one epoch of
    it); at least one step. Returns the steps with the budget, the epochs and the tokens per step."""
    if not reference or not data:
        raise ValueError("matched_steps: both datasets need at least one record")
    if batch < 1:
        raise ValueError(f"matched_steps: batch {batch!r} must be at least 1")
    ref_steps = reference_steps if reference_steps > 0 else math.ceil(len(reference) / batch)
    per_ref, per_data = batch * sum(reference) / len(reference), batch * sum(data) / len(data)
    budget = ref_steps * per_ref
    steps = max(1, round(budget / per_data))
    return {"reference_steps": ref_steps, "steps": steps, "batch": batch, "token_budget": round(budget),
            "tokens": round(steps * per_data),
            "tokens_per_step": {"reference": round(per_ref), "data": round(per_data)},
            "records": {"reference": len(reference), "data": len(data)},
            "epochs": {"reference": round(ref_steps * batch / len(reference), 2),
                       "data": round(steps * batch / len(data), 2)}}


__all__ = ["matched_steps"]
