"""The ``agentrag`` command line: one typer sub-app per command group (kb, llm, eval, synth, ...)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import platform
import sys
from typing import Annotated

import typer

from agentrag.cli.common import (
    console,
    exit_now_if_interrupted,
    install_interrupt_handler,
    setup_logging,
    styled,
)
from agentrag.threads import passive_openmp

app = typer.Typer(
    name="agentrag",
    help="Agentic RAG toolkit: build knowledge bases, run and evaluate search agents, synthesize "
    "training data (`agentrag synth --help` lists the synthesizers), export it and train on it, and browse "
    "any run in a self-contained HTML viewer (`agentrag view RUN_DIR`).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Command-group modules; each exposes ``register(app)``. Only modules that exist are listed: a
# missing one is an import error, never a silently absent group. Heavy libraries are imported
# inside the commands themselves.
GROUPS = ["kb", "llm", "eval", "synth", "export", "train", "view"]


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False) -> None:
    setup_logging(verbose)


@app.command()
def version() -> None:
    """Print the agentrag version and the versions of its key dependencies."""
    from agentrag.doctor import versions

    console.print(f"agentrag {md.version('agentrag')}  (python {platform.python_version()})")
    for name, v in versions().items():
        console.print(f"  {name:<22} {v}")


@app.command()
def doctor(
    check: Annotated[list[str] | None, typer.Option("--check", help="Run only this check (repeatable): "
                     "llm-chat, llm-json, embed, faiss, bm25, trl. Default: all.")] = None,
) -> None:
    """Check each embedded component the way the pipelines use it and print versions and pass/fail.

    Checks: a multi-token chat completion and a JSON-schema completion on the embedded LLM, an
    embedding batch, a FAISS search, a BM25 search, the TRL import. Each runs in its own
    subprocess, so a native crash (e.g. a segfault in llama.cpp) is reported as a failed check.
    Exit code 1 when any check fails. `make demo` runs this first.
    """
    from agentrag.doctor import CHECKS, run_check

    unknown = sorted(set(check or []) - set(CHECKS))
    if unknown:
        console.print(f"error: unknown check(s) {unknown}; choose from {', '.join(CHECKS)}", markup=False)
        raise typer.Exit(2)
    version()
    failed = 0
    for name in check or list(CHECKS):
        res = run_check(name)
        failed += not res.ok
        mark = ("PASS", "green") if res.ok else ("FAIL", "bold red")
        console.print(styled(mark, f" {res.title:<44} {res.seconds:6.1f} s  ", res.detail), highlight=False,
                      soft_wrap=True)
    if failed:
        console.print(f"{failed} check(s) failed", markup=False)
        raise typer.Exit(1)


def register_groups(target: typer.Typer, groups: list[str]) -> None:
    """Add each command group's sub-app to ``target`` (an ImportError if a module is missing)."""
    for name in groups:
        importlib.import_module(f"agentrag.cli.{name}").register(target)


register_groups(app, GROUPS)


def whole_help_when_piped() -> None:
    """``--help`` into a file or a pipe: typer renders it for an 80-column terminal and cuts option
    text with "…"; give it the wide width the CLI's other output uses there."""
    from typer import rich_utils

    from agentrag.cli.common import PIPED_WIDTH

    try:
        piped = not sys.stdout.isatty()
    except (AttributeError, ValueError):
        piped = True
    if piped and not rich_utils.MAX_WIDTH:
        rich_utils.MAX_WIDTH = PIPED_WIDTH


def main() -> None:
    # OpenMP (llama.cpp, torch) reads this once, at first import: passive waiting keeps idle worker
    # threads from spinning, which on a busy small machine makes the embedded model ~10x slower.
    passive_openmp()
    # The CLI never downloads at run time: models come from installed packages or local paths (or
    # the Hugging Face cache). Export HF_HUB_OFFLINE=0 to let a named hub model be fetched.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # no "Loading weights" bars of transformers (and hub bars) in normal output; export =0 to see them
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    install_interrupt_handler()
    whole_help_when_piped()
    try:
        app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        exit_now_if_interrupted(code)
        raise


if __name__ == "__main__":
    main()
