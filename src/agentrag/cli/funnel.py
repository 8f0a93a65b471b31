"""What a synthesizer command prints at its end: the funnel, and when it ends empty (or a stage kept
almost nothing), the explanation the run's report carries too (:mod:`agentrag.synth.advice`:
which stage, its top rejection reasons, tested advice) fitted to the command's options; output
paths only for files that were written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrag.cli.common import console, styled
from agentrag.synth.advice import REASON_HINTS, WORD_HINTS, empty_stage, explain_empty, fit_options, hint_for


def command_options() -> set[str] | None:
    """The option names of the command being run (None outside a command)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    return {o for p in ctx.command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
            if o.startswith("--")}


def print_funnel(funnel: Sequence[Mapping[str, Any]]) -> None:
    """One line per stage of a synthesizer's funnel (``metrics.json``): in -> out, rejections by
    reason, and the items an outage left unfinished; stage names padded to the longest."""
    width = max((len(str(row["stage"])) for row in funnel), default=0)
    units = {row.get("unit") or "items" for row in funnel}
    before = None
    for row in funnel:
        rej = ", ".join(f"{k}: {v}" for k, v in row["rejected"].items())
        left = f"  unfinished: {row['unfinished']}" if row.get("unfinished") else ""
        unit = row.get("unit") or "items"
        # where the counted thing changes (items -> sub-questions), "in" is not the "out" above: say so
        what = f"[{unit}] " if len(units) > 1 and unit != before else ""
        before = unit
        console.print(f"  {row['stage']:<{width}} {row['in']:>5} -> {row['out']:<5} {what}{rej}{left}", markup=False)


def print_empty_funnel(metrics: Mapping[str, Any], out: Path) -> bool:
    """Print :func:`explain_empty` in yellow (the run's config read from ``out/config.yaml``);
    returns whether the funnel was empty (a near-empty stage is explained too, but the run has
    output)."""
    import yaml

    cfg_path = out / "config.yaml"
    config = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else None
    lines = explain_empty(metrics.get("funnel") or [], config if isinstance(config, dict) else None,
                          command_options())
    for line in lines:
        console.print(styled((line, "yellow")), soft_wrap=True)
    return bool(lines) and lines[0].startswith("nothing was produced")


def written(*paths: Path | str) -> list[str]:
    """The paths among ``paths`` that exist as non-empty files (what may be printed as output)."""
    return [str(p) for p in paths if Path(p).is_file() and Path(p).stat().st_size > 0]


def print_outputs(label_paths: Sequence[tuple[str, Path | str]]) -> None:
    """``label: path`` for each written file, on one line (none: nothing is printed)."""
    shown = [f"{label}: {p}" for label, p in label_paths if written(p)]
    if shown:
        console.print("   ".join(shown), soft_wrap=True)


__all__ = ["explain_empty", "empty_stage", "hint_for", "fit_options", "command_options", "print_funnel",
           "print_empty_funnel", "print_outputs", "written", "REASON_HINTS", "WORD_HINTS"]
