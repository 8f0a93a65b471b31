"""The ``agentrag`` command line: one typer sub-app per command group (kb, llm, eval, synth, ...)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import platform
from typing import Annotated

import typer

from agentrag.cli.common import console, setup_logging

app = typer.Typer(
    name="agentrag",
    help="Agentic RAG toolkit: build knowledge bases, run and evaluate search agents, and synthesize "
    "training data (RAGShaper, EviPath, ReasonRAG, AgenticRAGTracer).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Command-group modules; each exposes ``register(app)``. Listed here, imported lazily per module
# (heavy libraries are imported inside the commands themselves).
GROUPS = ["kb", "llm", "eval", "synth", "export", "train", "report", "bench"]


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
                     "llm-chat, llm-json, embed, faiss, bm25, trl.")] = None,
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
        mark = "[green]PASS[/]" if res.ok else "[bold red]FAIL[/]"
        console.print(f"{mark} {res.title:<44} {res.seconds:6.1f} s  ", end="")
        console.print(res.detail, markup=False, highlight=False)
    if failed:
        console.print(f"{failed} check(s) failed", markup=False)
        raise typer.Exit(1)


for _name in GROUPS:
    try:
        _mod = importlib.import_module(f"agentrag.cli.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"agentrag.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:
    # OpenMP (llama.cpp, torch) reads this once, at first import: passive waiting keeps idle worker
    # threads from spinning, which on a busy small machine makes the embedded model ~10x slower.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # The CLI never downloads at run time: models come from installed packages or local paths (or
    # the Hugging Face cache). Export HF_HUB_OFFLINE=0 to let a named hub model be fetched.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    app()


if __name__ == "__main__":
    main()
