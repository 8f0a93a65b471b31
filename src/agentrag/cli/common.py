"""Options and helpers shared by every CLI command group."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

from agentrag.config import Config, load_config
from agentrag.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_UNFINISHED,
    AgentRagError,
    UserError,
    is_disk_error,
    storage_error,
)
from agentrag.exec import Progress

# Markup is off: what the CLI prints (paths, queries, titles, error messages) is user text and
# must appear verbatim ("/tmp/[run]/x" is a path, not a style tag). Style with ``styled`` instead.
#: the width of output that is not a terminal (a file, a pipe): wide, so that tables are not cut,
#: while plain lines are never wrapped at all (soft wrap)
PIPED_WIDTH = 200


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(stderr=stderr, markup=False)
    return Console(stderr=stderr, markup=False, soft_wrap=True, width=PIPED_WIDTH)


console = _console(stderr=False)
err_console = _console(stderr=True)

C = TypeVar("C", bound=Config)

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML config file; its keys are those of the command's config model "
                 "(--print-config shows them all). Default: none (the built-in defaults)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key of the command's config (the keys --config takes) as KEY=VALUE, "
                 "dotted for a nested key; the Example in this help shows one (repeatable; values are "
                 "parsed as YAML, so 3 is an int and true a bool). Default: none."),
]
ExecutorOpt = Annotated[
    str | None,
    typer.Option("--executor", help="Where per-item work runs: thread (a thread pool in this process, the "
                 "default) or ray (Ray worker processes; pip install 'agentrag\\[ray]'). The run directory, "
                 "resume and outputs are the same. Default: thread."),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option("--ray-address", help="With --executor ray: address of a running Ray cluster (auto, "
                 "host:6379, ray://host:10001). Default: start a local Ray instance."),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="Worker processes with --executor ray (default: 2); threads with "
                 "--executor thread (default: the command's concurrency). Items in flight stay "
                 "--concurrency in both cases.", min=1),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="Run directory (required); rerunning the same command with it resumes; "
                 "another configuration on it is refused (see --force-new-config)."),
]
PrintConfigOpt = Annotated[
    bool,
    typer.Option("--print-config", help="Print the fully resolved configuration (YAML: every key, defaults "
                 "included; what OUT/config.yaml holds) and exit without running."),
]
ForceNewConfigOpt = Annotated[
    bool,
    typer.Option("--force-new-config", help="When --out holds a run made with another configuration, write "
                 "this run to a new directory beside it (OUT.2, OUT.3, ...) instead of refusing. The old run "
                 "is never changed and rows of two configurations are never mixed."),
]


def alias(*decls: str, of: str) -> Any:
    """A hidden option: an old spelling of option ``of``, kept working for one release (not in --help)."""
    return typer.Option(*decls, hidden=True, help=f"Old spelling of {of}.")


T = TypeVar("T")


def pick(new: T | None, old: T | None, name: str, old_name: str) -> T | None:
    """The value of an option given under its name or its hidden old spelling (both: must agree)."""
    if new is not None and old is not None and new != old:
        raise UserError(f"{name} {new!r} and {old_name} {old!r} are the same option: give it once")
    return new if new is not None else old


def need_out(out: Path | None) -> Path:
    """The run directory of ``--out`` (a one-line error when it is missing)."""
    if out is None:
        raise UserError("no run directory: pass --out DIR")
    return out


class _Stderr:
    """``sys.stderr`` looked up at each write (a test runner or a redirect may replace it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def setup_logging(verbose: bool = False) -> None:
    """Configure logging once, for the CLI only (the library never configures logging).

    By default agentrag's own loggers print INFO and every other library only its warnings (an
    HTTP client's line per request, a model loader's progress are noise); ``--verbose`` prints
    DEBUG from agentrag and INFO from the libraries."""
    level = logging.DEBUG if verbose else logging.INFO
    handler: logging.Handler
    if err_console.is_terminal:
        handler = RichHandler(console=err_console, show_path=False, rich_tracebacks=False)
    else:  # a file or a pipe: one plain, unwrapped line per record
        handler = logging.StreamHandler(_Stderr())
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)-7s %(message)s", datefmt="%H:%M:%S"))
    # the handler's own level: a library logger set to DEBUG by its package still prints nothing
    # below INFO unless --verbose
    handler.setLevel(level)
    libraries = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=libraries, format="%(message)s", datefmt="[%X]", handlers=[handler], force=True)
    logging.getLogger("agentrag").setLevel(level)
    # uvicorn sets its own loggers to INFO when a server starts in this process
    for noisy in ("httpx", "httpx2", "httpcore", "urllib3", "sentence_transformers", "faiss", "filelock",
                  "transformers", "bm25s", "openai", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def resolve_config(model: type[C], config: Path | None, sets: list[str] | None,
                   base: dict[str, Any] | None = None) -> C:
    """Load ``model`` from CLI-level values, the ``--config`` file, then the ``--set`` overrides."""
    return load_config(model, config, sets or [], base={k: v for k, v in (base or {}).items() if v is not None})


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain text pieces and ``(text, style)`` pieces; no markup is parsed."""
    return Text.assemble(*parts)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn agentrag errors into a red one-line message and the documented exit code (no
    traceback): 2 for bad input or configuration (a 401/404 endpoint, an unwritable --out
    included), 1 for a bug, 3 for a first Ctrl-C (finished items kept), 130 for a second. See docs/concepts.md, "Exit codes"."""
    try:
        try:
            yield
        finally:
            _flush_llm_caches()
    except UserError as exc:
        from agentrag.cli.checks import csv_hint

        err_console.print(styled(("error: ", "bold red"), str(exc) + csv_hint(str(exc))), highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except AgentRagError as exc:
        err_console.print(styled((f"{type(exc).__name__}: ", "bold red"), str(exc)), highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_BUG) from None
    except KeyboardInterrupt:
        err_console.print(styled(("stopped: every finished item is kept; rerun the same command to finish the "
                                  "rest", "yellow")))
        raise typer.Exit(EXIT_UNFINISHED) from None
    except Exception as exc:
        if not is_disk_error(exc):  # a full or failing disk anywhere (a report, an export): one line, exit 2
            raise
        err_console.print(styled(("error: ", "bold red"), str(storage_error(exc))), highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _flush_llm_caches() -> None:
    """Write LLM replies a failing disk did not take during the command (when it has room now)."""
    cache = sys.modules.get("agentrag.llm.cache")
    if cache is not None:
        cache.flush_unsaved()


#: Ctrl-C presses seen by :func:`install_interrupt_handler`'s handler
_interrupts = 0
#: seconds after the first Ctrl-C before the process exits even if the command has not unwound
STOP_GRACE_S = 5.0


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _on_sigint(signum: int, frame: Any) -> None:
    """First Ctrl-C: say what is abandoned and raise KeyboardInterrupt in the main thread (the
    executor cancels pending items; finished ones are already written); a watchdog exits with 3
    after :data:`STOP_GRACE_S` if an uninterruptible call (an embedded model) holds the command.
    Second Ctrl-C: exit at once with 130."""
    global _interrupts
    _interrupts += 1
    if _interrupts > 1:
        _flush()
        os._exit(EXIT_INTERRUPTED)
    from agentrag.exec.base import items_in_flight

    n = items_in_flight()
    err_console.print(styled((f"stopping: {n} item{'s' if n != 1 else ''} in flight (abandoned; finished items are "
                              "kept). Ctrl-C again to exit at once.", "yellow")))

    def watchdog() -> None:
        time.sleep(STOP_GRACE_S)
        _flush()
        os._exit(EXIT_UNFINISHED)

    threading.Thread(target=watchdog, name="agentrag-stop", daemon=True).start()
    raise KeyboardInterrupt


def install_interrupt_handler() -> None:
    """Ctrl-C handling of the ``agentrag`` program (not installed for in-process callers)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)


def exit_now_if_interrupted(code: int) -> None:
    """After a Ctrl-C the command has unwound (its files closed): exit without joining worker
    threads still inside an abandoned item (they are non-daemon and would keep the process alive)."""
    if _interrupts:
        _flush()
        logging.shutdown()
        os._exit(code)


def exit_if_unfinished(unfinished: int, what: str = "items") -> None:
    """Exit with :data:`~agentrag.errors.EXIT_UNFINISHED` (3) when ``unfinished`` items remain."""
    if unfinished:
        err_console.print(styled((f"{unfinished} {what} unfinished (an outage or a lost worker); they are not "
                                  "recorded. Rerun the same command to finish them.", "yellow")))
        raise typer.Exit(EXIT_UNFINISHED)


@contextmanager
def executor_from_options(executor: str | None, workers: int | None, ray_address: str | None,
                          concurrency: int) -> Iterator[Any]:
    """The executor of ``--executor/--workers/--ray-address`` (closed at the end of the block).

    ``thread``: ``workers`` threads (default ``concurrency``). ``ray``: ``workers`` worker
    processes (default 2) each running ``ceil(concurrency / workers)`` items at a time.
    """
    from agentrag.exec import resolve_executor

    name = executor or "thread"
    if ray_address and name != "ray":
        raise UserError("--ray-address needs --executor ray")
    if name == "ray":
        n = workers or 2
        ex: Any = resolve_executor("ray", n, ray_address, threads=max(1, -(-concurrency // n)))
    else:
        ex = resolve_executor(name, workers or concurrency)
    try:
        yield ex
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()


F = TypeVar("F", bound=Callable[..., Any])


def is_tty() -> bool:
    return sys.stderr.isatty()


@contextmanager
def stage_progress() -> Iterator[Progress]:
    """A rich progress bar on stderr, one row per stage; yields the pipeline's progress callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<8}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield progress


__all__ = ["console", "err_console", "ConfigOpt", "SetOpt", "OutOpt", "ExecutorOpt", "RayAddressOpt", "WorkersOpt",
           "executor_from_options", "setup_logging", "resolve_config", "user_errors", "exit_if_unfinished", "styled",
           "is_tty", "install_interrupt_handler", "exit_now_if_interrupted",
           "stage_progress", "PrintConfigOpt", "ForceNewConfigOpt", "alias", "pick", "need_out"]
