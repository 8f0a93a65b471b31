"""``agentrag synth``: one command per registered synthesizer (training data and benchmarks)."""

from __future__ import annotations

import importlib

import typer

synth_app = typer.Typer(help="Synthesize agentic-RAG training data (tasks, trajectories, SFT exports); "
                        "one command per synthesizer, listed below.", no_args_is_help=True)


def _register_commands() -> None:
    """One command per registered synthesizer (:data:`agentrag.synth.registry.SYNTHESIZERS`), from
    its CLI module ``agentrag.cli.synth_<name>`` (``register(synth_app)``); a synthesizer without
    one has no command (it runs from Python)."""
    from agentrag.synth.registry import SYNTHESIZERS

    for name in SYNTHESIZERS:
        try:
            module = importlib.import_module(f"agentrag.cli.synth_{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"agentrag.cli.synth_{name}":
                raise
            continue
        module.register(synth_app)


_register_commands()


def register(app: typer.Typer) -> None:
    app.add_typer(synth_app, name="synth")
