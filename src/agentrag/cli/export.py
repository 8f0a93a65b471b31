"""``agentrag export``: trajectories and preference pairs as training data (TRL, LLaMA-Factory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentrag.cli.common import console, err_console, styled, user_errors
from agentrag.errors import EXIT_UNFINISHED, UserError
from agentrag.paths import check_input_file

export_app = typer.Typer(help="Export trajectories (SFT) and preference pairs (DPO) for TRL and LLaMA-Factory.",
                         no_args_is_help=True)

SystemOpt = Annotated[
    str | None,
    typer.Option("--system-prompt", help="System prompt of every exported chat: the text, or @FILE to read it. "
                 "Default: the system message the trajectory recorded, else a generic one."),
]
LicenseOpt = Annotated[
    str | None,
    typer.Option("--license", help="License id for the dataset card (e.g. cc-by-sa-4.0, the license of "
                 "Wikipedia text). Default: unknown (it follows your corpus and model)."),
]
ToolsOpt = Annotated[
    Path | None,
    typer.Option("--tools", help="JSON file with the list of OpenAI tool schemas the agent had. "
                 "Default: the dense retrieval tool."),
]


def _system(value: str | None) -> str | None:
    if value is None or not value.startswith("@"):
        return value
    p = check_input_file(value[1:], "--system-prompt")
    return p.read_text(encoding="utf-8").strip()


def _tools(path: Path | None) -> list[dict[str, object]] | None:
    if path is None:
        return None
    check_input_file(path, "--tools")
    try:
        tools = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise UserError(f"{path}: expected a JSON list of tool schemas")
    return tools


def nothing_exported(why: str) -> None:
    """An export of 0 records: a one-line reason and exit 3 (its files are written, empty)."""
    err_console.print(styled(("nothing exported: ", "bold yellow"), why), highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_UNFINISHED)


@export_app.command("sft")
def sft(
    trajectories: Annotated[Path, typer.Option(
        "--trajectories", "-t", help="Trajectories JSONL file, or an eval run's results.jsonl (each result "
        "carries its trajectory).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    system_prompt: SystemOpt = None,
    tools: ToolsOpt = None,
    include_unanswered: Annotated[bool, typer.Option(
        "--include-unanswered", help="Also export trajectories that did not end with an answer.")] = False,
    where: Annotated[str | None, typer.Option(
        "--where", help="Eval results only: keep those that are 'correct' (judge verdict when judged, else EM) "
        "or have 'em' 1 (rejection-sampled SFT). Default: keep all.")] = None,
    min_judge: Annotated[int | None, typer.Option(
        "--min-judge", help="Eval results only: keep those with an LLM-judge score >= N (0-2). Default: "
        "no minimum.")] = None,
    keep_reasoning: Annotated[bool, typer.Option(
        "--keep-reasoning", help="Start each assistant turn with the step's reasoning (reasoning models' "
        "reasoning_content / <think> text) in a <think> block. Default: dropped.")] = False,
    license: LicenseOpt = None,
) -> None:
    """Write trl_sft.jsonl (TRL messages + tools; observations are role 'tool', masked from the loss),
    sharegpt.jsonl and dataset_info.json (LLaMA-Factory) from a trajectories file."""
    with user_errors():
        from agentrag.export.sft import write_sft_export
        from agentrag.export.source import ResultFilter, read_sft_source

        if where is not None and where not in ("correct", "em"):
            raise UserError(f"--where must be 'correct' or 'em', got {where!r}")
        src = read_sft_source(trajectories, ResultFilter(where=where, min_judge=min_judge))  # type: ignore[arg-type]
        if src.kind == "eval results":
            console.print(f"read {src.rows} eval results: {src.filtered_out} filtered out, "
                          f"{src.without_trajectory} without a trajectory")
        summary = write_sft_export(out, src.trajectories, _system(system_prompt), _tools(tools),
                                   only_answered=not include_unanswered, reasoning=keep_reasoning,
                                   license=license)
        console.print(f"exported {summary['exported']} of {summary['trajectories']} trajectories "
                      f"({summary['skipped']} skipped) to {out}")
        if not summary["exported"]:
            reasons = [f"{src.filtered_out} filtered out by --where/--min-judge" if src.filtered_out else "",
                       f"{src.without_trajectory} eval results without a trajectory" if src.without_trajectory else "",
                       f"{summary['skipped']} did not end with an answer (--include-unanswered exports them)"
                       if summary["skipped"] else "",
                       "the file holds no records" if not src.rows else ""]
            nothing_exported(", ".join(r for r in reasons if r) or "no trajectory gave a training chat")


@export_app.command("dpo")
def dpo(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Preference pairs JSONL file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    tools: ToolsOpt = None,
    license: LicenseOpt = None,
) -> None:
    """Write trl_dpo.jsonl (TRL prompt/chosen/rejected chats), dpo_sharegpt.jsonl (LLaMA-Factory
    sharegpt ranking, tool turns typed), dpo_alpaca.jsonl (the single-turn plain pairs) and
    dataset_info.json from a preference pairs file."""
    with user_errors():
        from agentrag.export.dpo import read_pairs, write_dpo_export

        summary = write_dpo_export(out, read_pairs(pairs), _tools(tools), license=license)
        console.print(f"exported {summary['exported']} preference pairs to {out}")
        if summary["sharegpt_cut"]:
            console.print(f"{summary['sharegpt_cut']} pairs cut after their first differing assistant turn in "
                          "dpo_sharegpt.jsonl (LLaMA-Factory's ranking form holds one turn a side)")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
