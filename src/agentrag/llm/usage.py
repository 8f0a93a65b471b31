"""One LLM-usage block for every run (eval and the four synthesizers): ``metrics["llm"]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def llm_usage(roles: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One LLM-usage block, the shape of the synthesizers' ``llm``: ``{"role+role": stats}`` for
    each distinct LLM object (cache hits and misses, backend calls, tokens), keyed by its roles."""
    by_obj: dict[int, tuple[list[str], Any]] = {}
    for role, obj in roles.items():
        if obj is not None:
            by_obj.setdefault(id(obj), ([], obj))[0].append(role)
    out: dict[str, dict[str, Any]] = {}
    for names, obj in by_obj.values():
        stats = getattr(obj, "stats", None)
        if callable(stats):
            out["+".join(names)] = dict(stats())
        else:
            meter = getattr(obj, "meter", None)
            snap = meter.snapshot() if meter is not None and hasattr(meter, "snapshot") else {}
            out["+".join(names)] = {"calls": getattr(obj, "calls", None), **snap}
    return out


__all__ = ["llm_usage"]
