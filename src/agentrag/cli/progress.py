"""Progress of long commands: a live bar per stage on a terminal, plain heartbeat lines with
done/total, rate and ETA when the output is a file or a pipe (nohup, Slurm), by default."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentrag.cli.common import err_console, is_tty, stage_progress
from agentrag.exec import Progress
from agentrag.progress import EVERY_FRAC, HEARTBEAT_S, Heartbeat

#: a progress line at least this often (seconds) and at every this fraction of a stage
PROGRESS_EVERY_S = HEARTBEAT_S
PROGRESS_EVERY_FRAC = EVERY_FRAC


class LogProgress(Heartbeat):
    """The library's :class:`~agentrag.progress.Heartbeat` writing to the CLI's stderr console: the
    progress of a long command whose output is not a terminal (nohup, Slurm, a pipe)."""

    def __init__(self, emit: Callable[[str], None] | None = None, every_s: float = PROGRESS_EVERY_S,
                 every_frac: float = PROGRESS_EVERY_FRAC, clock: Callable[[], float] = time.monotonic,
                 unit: str = "items"):
        super().__init__(emit or (lambda line: err_console.print(line, markup=False, highlight=False,
                                                                  soft_wrap=True)),
                         every_s=every_s, every_frac=every_frac, clock=clock, unit=unit)


@contextmanager
def progress_output(unit: str = "items") -> Iterator[Progress]:
    """The progress callback of a long command: a live bar per stage on a terminal, else
    :class:`LogProgress` lines (on by default; nothing to set)."""
    if is_tty():
        with stage_progress() as bar:
            yield bar
    else:
        with LogProgress(unit=unit).running() as beat:  # a line every 30 s even while no item finishes
            yield beat


#: seconds between two looks at the embedding checkpoint of a build
EMBED_POLL_S = 2.0


@contextlib.contextmanager
def embedding_progress_lines(out: Path, poll_s: float = EMBED_POLL_S,
                             progress: LogProgress | None = None) -> Iterator[None]:
    """Progress lines of the embedding step when stderr is not a terminal (the bar is then off):
    a thread reads the resumable checkpoint ``OUT.partial/embeddings.npy.progress.json`` (chunks
    done; the passage count and chunk size are in its fingerprint ``n:dim:model:chunk:key``)."""
    state = out.with_name(out.name + ".partial") / "embeddings.npy.progress.json"
    report = progress or LogProgress(unit="passages")
    stop = threading.Event()

    def look() -> None:
        try:
            data = json.loads(state.read_text())
            parts = str(data["fingerprint"]).split(":")
            n, chunk = int(parts[0]), int(parts[-2])
            report("embedding", min(int(data["done_chunks"]) * chunk, n), n)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            pass  # not started yet, or written right now

    def watch() -> None:
        while not stop.wait(poll_s):
            look()
            report.tick()

    thread = threading.Thread(target=watch, name="agentrag-kb-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        look()  # the last line (100%) when the embedding finished



__all__ = ["LogProgress", "progress_output", "embedding_progress_lines", "PROGRESS_EVERY_S", "PROGRESS_EVERY_FRAC"]
