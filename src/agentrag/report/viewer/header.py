"""What a page says about its run as a whole: the run header (model, dataset, key configuration,
tokens and calls, wall time), every synthesizer's statistics for its Summary tab (the sections of
its report, which stays a file too), and for a failed record the setting that would have helped."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentrag.render import fmt_cell

#: the configuration keys the header names for the runs that are not a synthesizer's (a synthesizer
#: declares its own: ``key_config``)
KEY_CONFIG: dict[str, tuple[str, ...]] = {
    "eval": ("agent", "agent_config.max_steps", "agent_config.top_k", "agent_config.max_tokens", "limit",
             "concurrency", "correct_by"),
    "suite": ("reference", "limit", "concurrency", "correct_by", "resamples"),
}
MODEL_KEYS = ("llm", "teacher", "judge", "executor_llm", "agent_config.executor_llm", "tagger")
DATA_KEYS = ("dataset", "datasets", "kb")


def flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _short(v: Any) -> str:
    if isinstance(v, list):  # a suite's datasets are {name, path, fmt} entries: their names
        return ", ".join(str(x.get("name") or x.get("path")) if isinstance(x, Mapping) else str(x) for x in v)
    return fmt_cell(v)


def usage_totals(metrics: Mapping[str, Any], per_record: Sequence[Sequence[int]] = ()) -> tuple[int, int, int] | None:
    """(prompt tokens, completion tokens, calls) of the run: the ``llm`` block of ``metrics.json``
    (calls = backend calls + cache hits), else the sum of the records' ``[prompt, completion, calls]``."""
    blocks = [b for b in (metrics.get("llm") or {}).values() if isinstance(b, Mapping)]
    if blocks:
        def total(*keys: str) -> int:
            return sum(int(b.get(k) or 0) for b in blocks for k in keys)
        calls = total("hits", "misses") or total("calls") or total("inner_calls")
        return total("prompt_tokens"), total("completion_tokens"), calls
    if per_record:
        return (sum(int(u[0]) for u in per_record), sum(int(u[1]) for u in per_record),
                sum(int(u[2]) if len(u) > 2 else 0 for u in per_record))
    return None


def run_header(kind: str, config: Mapping[str, Any], metrics: Mapping[str, Any],
               per_record: Sequence[Sequence[int]] = ()) -> list[list[str]]:
    """``[label, value]`` pairs of the run header (labels: model, dataset, config, tokens, wall time)."""
    f = flat(config)
    out: list[list[str]] = []
    models = [f"{k}: {f[k]}" for k in MODEL_KEYS if f.get(k)]
    if models:
        out.append(["model", " · ".join(models)])
    data = [f"{k}: {_short(f[k])}" for k in DATA_KEYS if f.get(k)]
    if data:
        out.append(["data", " · ".join(data)])
    keys = [f"{k}={_short(f[k])}" for k in key_config(kind) if k in f and f[k] is not None]
    if keys:
        out.append(["config", "  ".join(keys)])
    usage = usage_totals(metrics, per_record)
    if usage is not None:
        out.append(["tokens", f"{usage[0]:,} prompt + {usage[1]:,} completion, {usage[2]:,} calls"])
    wall = metrics.get("wall_s")
    if isinstance(wall, (int, float)):
        out.append(["wall time", f"{wall:,.1f} s"])
    return out


def key_config(kind: str) -> tuple[str, ...]:
    """The configuration keys the header names for a run of ``kind`` (when present)."""
    if kind in KEY_CONFIG:
        return KEY_CONFIG[kind]
    from agentrag.synth.registry import SYNTHESIZERS, synthesizer_class

    return tuple(synthesizer_class(kind).key_config) if kind in SYNTHESIZERS else ()


def synth_summary(kind: str, metrics: Mapping[str, Any], have: set[str]) -> list[dict[str, Any]]:
    """The synthesizer's report sections (its statistics, LLM usage, unfinished items) as summary
    entries (title, text, headers, rows, svg), skipping titles the page already has."""
    if not metrics or kind in ("eval", "suite"):
        return []
    from agentrag.synth.driver import run_sections

    synth = _synth(kind)
    sections = [*(synth.report_sections(dict(metrics)) if synth is not None else []), *run_sections(metrics)]
    out = []
    for s in sections:
        d = s.model_dump() if hasattr(s, "model_dump") else dict(s)
        title = str(d.get("title") or "")
        if not title or title in have:
            continue
        have.add(title)
        out.append({"title": title, "text": str(d.get("text") or ""), "headers": list(d.get("headers") or []),
                    "rows": [list(r) for r in d.get("rows") or []], "svg": str(d.get("svg") or "")})
    return out


def _synth(kind: str) -> Any:
    from agentrag.synth.registry import SYNTHESIZERS, synthesizer

    return synthesizer(kind) if kind in SYNTHESIZERS else None


def failure_help(reason: str | None, config: Mapping[str, Any], finish: str | None = None) -> str | None:
    """The setting (or model change) that would have helped a failed record, from its reason text
    or finish reason and the run's configuration."""
    f = flat(config)
    text = f"{reason or ''} {finish or ''}"
    m = re.search(r"max_tokens=(\d+)", text)
    if m or "length" in (finish or ""):
        keys = [k for k, v in f.items() if k.rsplit(".", 1)[-1] == "max_tokens" and (not m or str(v) == m.group(1))]
        where = " or ".join(keys) if keys else "the stage's max_tokens"
        now = f" (now {m.group(1)})" if m else ""
        return f"the output was cut off: raise {where}{now} (--set {keys[0] if keys else 'KEY'}=N on a new --out)"
    if "context_limit" in text:
        return "the request was over the model's context window: raise the LLM's n_ctx, or lower top_k"
    if finish == "max_steps":
        key = next((k for k in f if k.rsplit(".", 1)[-1] == "max_steps"), "max_steps")
        return f"the agent ran out of steps: raise {key} (now {f.get(key, '?')})"
    if "no tool call" in text or "empty reply" in text:
        return ("the model answered without a tool call or <answer> tags (the agent's format): a stronger --llm "
                "(an instruct model that calls tools)")
    if "parse_error" in text or "format" in text:
        return "the model's output did not parse: a stronger --llm (an instruct model of 7B+)"
    return None


__all__ = ["run_header", "synth_summary", "failure_help", "usage_totals", "key_config", "KEY_CONFIG"]
