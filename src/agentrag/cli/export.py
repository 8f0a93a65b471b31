"""``agentrag export``: trajectories and preference pairs as training data (TRL, LLaMA-Factory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentrag.cli.common import console, user_errors
from agentrag.errors import UserError
from agentrag.paths import check_input_file

export_app = typer.Typer(help="Export trajectories (SFT) and preference pairs (DPO) for TRL and LLaMA-Factory.",
                         no_args_is_help=True)

SystemOpt = Annotated[
    str | None,
    typer.Option("--system-prompt", help="System prompt of every exported chat: the text, or @FILE to read it. "
                 "Default: the system message the trajectory recorded, else a generic one."),
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


@export_app.command("sft")
def sft(
    trajectories: Annotated[Path, typer.Option("--trajectories", "-t", help="Trajectories JSONL file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    system_prompt: SystemOpt = None,
    tools: ToolsOpt = None,
    include_unanswered: Annotated[bool, typer.Option(
        "--include-unanswered", help="Also export trajectories that did not end with an answer.")] = False,
) -> None:
    """Write trl_sft.jsonl (TRL messages + tools; observations are role 'tool', masked from the loss),
    sharegpt.jsonl and dataset_info.json (LLaMA-Factory) from a trajectories file."""
    with user_errors():
        from agentrag.export.sft import read_trajectories, write_sft_export

        summary = write_sft_export(out, read_trajectories(trajectories), _system(system_prompt), _tools(tools),
                                   only_answered=not include_unanswered)
        console.print(f"exported {summary['exported']} of {summary['trajectories']} trajectories "
                      f"({summary['skipped']} skipped) to {out}")


@export_app.command("dpo")
def dpo(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Preference pairs JSONL file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    tools: ToolsOpt = None,
) -> None:
    """Write trl_dpo.jsonl (TRL prompt/chosen/rejected chats), dpo_alpaca.jsonl and dataset_info.json
    (LLaMA-Factory ranking format) from a preference pairs file."""
    with user_errors():
        from agentrag.export.dpo import read_pairs, write_dpo_export

        summary = write_dpo_export(out, read_pairs(pairs), _tools(tools))
        console.print(f"exported {summary['exported']} preference pairs to {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
