"""The resolved configuration of a run: ``--print-config``, and one configuration per run directory
(a rerun with another one is refused with the keys that differ, or written beside it with
``--force-new-config``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from agentrag.cli.common import err_console, styled
from agentrag.errors import UserError
from agentrag.llm.reference import LLM_KEYS, parse_llm_ref

#: keys that may change between runs on one directory: they decide how much is run or how fast,
#: never what a finished row holds (``--limit 20`` after ``--limit 10`` extends the run)
RESUMABLE_KEYS = ("concurrency", "limit")


#: stage files that only copy a run's inputs (written before any model call): rows in them are not results
INPUT_FILES = ("questions.jsonl", "items.jsonl", "seeds.jsonl")


def has_results(path: Path) -> bool:
    """Whether run directory ``path`` holds a finished row (a non-empty stage file other than the
    input copies). A run stopped before its first result (a 401, a wrong URL) may be rerun with a
    corrected configuration."""
    return any(f.name not in INPUT_FILES and f.stat().st_size > 0 for f in path.glob("*.jsonl"))


def print_config(cfg: Any) -> None:
    """``--print-config``: the fully resolved configuration as YAML on stdout, then exit 0. A
    ``concurrency`` left to its default (null: it follows the LLMs) gets the value it resolves to
    as a comment on its line."""
    from agentrag.config import dump_config

    sys.stdout.write(resolved_comments(cfg, dump_config(cfg)))
    sys.stdout.flush()
    raise typer.Exit(0)


def resolved_comments(cfg: Any, text: str) -> str:
    """``text`` (the YAML of ``cfg``) with ``concurrency: null`` annotated by what it resolves to."""
    resolve = getattr(cfg, "items_in_flight", None)
    if getattr(cfg, "concurrency", 0) is not None or not callable(resolve):
        return text
    from agentrag.llm.adaptive import ITEMS_PER_REQUEST_SLOT, REMOTE_ITEMS_IN_FLIGHT

    n = resolve()
    if n == REMOTE_ITEMS_IN_FLIGHT:  # an endpoint among the LLMs: n is its request limit
        note = (f"concurrency: null  # resolved: {n} requests to the endpoint at most, {n * ITEMS_PER_REQUEST_SLOT} "
                "items in flight (the default for the LLMs named)")
    else:
        note = f"concurrency: null  # resolved: {n} items in flight (the default for the LLMs named)"
    return "\n".join(note if line == "concurrency: null" else line for line in text.split("\n"))


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def _llm_identity(ref: Any) -> Any:
    """What an LLM reference answers with (backend, model, sampling), without its endpoint."""
    if not isinstance(ref, str) or not ref:
        return ref
    try:
        return parse_llm_ref(ref).identity()
    except (UserError, OSError):
        return ref


def config_diff(old: dict[str, Any], new: dict[str, Any], may_change: tuple[str, ...] = ()) -> list[str]:
    """``key: old -> new`` for every dotted key that differs, except those under ``may_change``;
    LLM references (``llm``, ``judge``, ...) compare by model and sampling settings, not endpoint."""
    a, b = _flat(old), _flat(new)
    for flat in (a, b):
        for key, value in flat.items():
            if key.rsplit(".", 1)[-1] in LLM_KEYS:
                flat[key] = _llm_identity(value)
    lines = []
    for key in sorted(set(a) | set(b)):
        if any(key == m or key.startswith(m + ".") for m in may_change):
            continue
        if a.get(key, "(unset)") != b.get(key, "(unset)"):
            lines.append(f"{key}: {_flat(old).get(key, '(unset)')!r} -> {_flat(new).get(key, '(unset)')!r}")
    return lines


def _stored(path: Path, model: type[Any], normalize: Callable[[Any], Any]) -> dict[str, Any] | None:
    import yaml
    from pydantic import ValidationError

    target = path / "config.yaml"
    if not target.exists():
        return None
    raw = yaml.safe_load(target.read_text(encoding="utf-8")) or {}
    try:  # an older run: its stored keys through today's model (defaults it did not write filled in)
        return dict(normalize(model.model_validate(raw)).model_dump(mode="json"))
    except (ValidationError, UserError):
        return dict(raw)


def run_dir_for(out: Path, cfg: Any, *, force_new: bool = False, may_change: tuple[str, ...] = (),
                normalize: Callable[[Any], Any] = lambda c: c) -> Path:
    """The directory this run writes to. A fresh ``out``, one without results (:func:`has_results`)
    or one made with the same configuration (keys under :data:`RESUMABLE_KEYS` and ``may_change``
    aside): ``out`` itself (resume). One with results made with another configuration: a :class:`UserError` showing the differing keys, or with
    ``force_new`` the first ``OUT.N`` (N = 2, 3, ...) that is fresh or holds this configuration."""
    allowed = RESUMABLE_KEYS + may_change
    new = dict(cfg.model_dump(mode="json"))
    old = _stored(out, type(cfg), normalize)
    diff = [] if old is None else config_diff(old, new, allowed)
    if not diff or not has_results(out):
        return out
    if not force_new:
        shown = "\n  ".join(diff[:12]) + (f"\n  ... and {len(diff) - 12} more" if len(diff) > 12 else "")
        raise UserError(f"{out} holds a run made with another configuration (its config.yaml); resuming it with "
                        f"this one would mix rows of two configurations:\n  {shown}\nUse a new --out, or "
                        "--force-new-config to write this run to a new directory beside it (OUT.2, ...).")
    n = 2
    while True:
        candidate = out.with_name(f"{out.name}.{n}")
        old = _stored(candidate, type(cfg), normalize)
        if old is None or not config_diff(old, new, allowed) or not has_results(candidate):
            err_console.print(styled((f"{out} holds another configuration: this run writes to {candidate}",
                                      "yellow")))
            return candidate
        n += 1


__all__ = ["RESUMABLE_KEYS", "INPUT_FILES", "has_results", "print_config", "resolved_comments", "config_diff", "run_dir_for"]
