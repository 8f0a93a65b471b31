"""``agentrag view``: the run viewer of a run directory (static HTML file, or served on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrag.cli.common import console, user_errors
from agentrag.report.viewer.common import MAX_MB, TEXT_CHARS


def view(
    run_dir: Annotated[Path, typer.Argument(help="A run directory: the --out of `agentrag eval` or of a synth "
                                                 "command (ragshaper, evipath, reasonrag, tracer).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file to write (default: "
                                             "RUN_DIR/viewer.html).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 instead of writing a file "
                                        "(for large runs: records are fetched one at a time, text is not cut); "
                                        "Ctrl-C stops it.")] = False,
    port: Annotated[int, typer.Option("--port", help="Port of --serve (0: a free port).")] = 0,
    doc_chars: Annotated[int | None, typer.Option("--doc-chars", help="Cut every document at this many "
                                                  "characters (0: whole documents). Default: whole when the file "
                                                  "stays under --max-mb, else the longest cut that fits.")] = None,
    max_mb: Annotated[float, typer.Option("--max-mb", help="Size the file is fitted into by cutting documents.")]
    = MAX_MB,
    force: Annotated[bool, typer.Option("--force", help="Replace --out even when it is an existing file that is "
                                        "not a viewer page.")] = False,
    text_chars: Annotated[int, typer.Option("--text-chars", help="Characters kept of other long texts "
                                            "(observations, thoughts, responses, evidence; 0: whole).")] = TEXT_CHARS,
) -> None:
    """Write a self-contained HTML page to browse a run directory (eval or synthesizer run).

    Eval runs: items with EM/F1/judge, filters (wrong only, hops, finish reason), trajectories
    with gold passages, charts. Synthesizer runs: RAGShaper trees and funnel, EviPath plans and
    selections, ReasonRAG MCTS trees with Q/N and pairs, Tracer chains with verdicts. The kind of
    run is detected from its files. The page needs no server and no network; it opens from disk.

    Example: agentrag view runs/demo/eval_react (writes runs/demo/eval_react/viewer.html).
    """
    with user_errors():
        if serve:
            from agentrag.report.viewer.serve import make_server

            server = make_server(run_dir, port)
            console.print(f"serving the viewer of {run_dir} at {server.url} (Ctrl-C stops)")
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                console.print("stopped")
            finally:
                server.server_close()
            return
        from agentrag.report.viewer import write_viewer

        path = write_viewer(run_dir, out, doc_chars=doc_chars, text_chars=text_chars, max_mb=max_mb, force=force)
        size = path.stat().st_size / 1e6
        console.print(f"wrote {path} ({size:.2f} MB); open it in a browser")


def register(app: typer.Typer) -> None:
    app.command("view")(view)
