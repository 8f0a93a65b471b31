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


def add_usage(before: Mapping[str, Mapping[str, Any]], now: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Two LLM-usage blocks (:func:`llm_usage`) summed role by role: the counts, tokens and
    seconds of both (a role in one block only is kept as it is); ``hit_rate`` is recomputed from
    the summed hits and misses. A run resumed over several invocations reports what all of them
    paid this way."""
    out: dict[str, dict[str, Any]] = {k: dict(v) for k, v in before.items()}
    for role, stats in now.items():
        old = out.get(role)
        if old is None:
            out[role] = dict(stats)
            continue
        merged = dict(old)
        for k, v in stats.items():
            prev = old.get(k)
            if k == "hit_rate":
                continue
            if _number(v) and _number(prev):
                total = prev + v
                merged[k] = round(total, 3) if isinstance(total, float) else total
            else:
                merged[k] = v
        if "hit_rate" in merged or "hit_rate" in stats:
            seen = (merged.get("hits") or 0) + (merged.get("misses") or 0)
            merged["hit_rate"] = round((merged.get("hits") or 0) / seen, 4) if seen else 0.0
        out[role] = merged
    return out


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


__all__ = ["llm_usage", "add_usage"]
