"""Progress of long commands: a live bar per stage on a terminal, plain lines with done/total, rate
and ETA when the output is a file or a pipe (nohup, Slurm), by default."""

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

#: a progress line at least this often (seconds) and at every this fraction of a stage
PROGRESS_EVERY_S = 30.0
PROGRESS_EVERY_FRAC = 0.05
#: ... but a fraction line no sooner than this after the previous line (a fast stage prints its start and end)
PROGRESS_MIN_GAP_S = 5.0


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class LogProgress:
    """The progress callback ``(stage, done, total)`` for output that is not a terminal (nohup,
    Slurm, a pipe): one plain line per stage every :data:`PROGRESS_EVERY_S` seconds or
    :data:`PROGRESS_EVERY_FRAC` of the stage (at most one per :data:`PROGRESS_MIN_GAP_S`), and at its end, with done/total, rate and ETA. The
    rate counts this run's items only (a resumed run's earlier items are not in it)."""

    def __init__(self, emit: Callable[[str], None] | None = None, every_s: float = PROGRESS_EVERY_S,
                 every_frac: float = PROGRESS_EVERY_FRAC, clock: Callable[[], float] = time.monotonic,
                 unit: str = "items"):
        self.emit = emit or (lambda line: err_console.print(line, markup=False, highlight=False, soft_wrap=True))
        self.every_s, self.every_frac, self.clock, self.unit = every_s, every_frac, clock, unit
        self.min_gap_s = min(PROGRESS_MIN_GAP_S, every_s)
        self._stages: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        with self._lock:
            line = self._due(stage, done, total, now)
        if line is not None:
            self.emit(line)

    def _due(self, stage: str, done: int, total: int, now: float) -> str | None:
        st = self._stages.get(stage)
        if st is None:  # first sight: say the stage started (a resumed one from where it is)
            self._stages[stage] = {"t0": now, "done0": done, "last_t": now, "last_done": done}
            pct = f" ({100 * done / total:.0f}%)" if total else ""
            return f"[{time.strftime('%H:%M:%S')}] {stage}: {done}/{total}{pct}, started"
        frac_step = (done - st["last_done"]) / total if total else 0.0
        finished = total > 0 and done >= total > st["last_done"]
        since = now - st["last_t"]
        if not (finished or since >= self.every_s or (frac_step >= self.every_frac and since >= self.min_gap_s)):
            return None
        st["last_t"], st["last_done"] = now, done
        return self.line(stage, done, total, done - st["done0"], now - st["t0"])

    def line(self, stage: str, done: int, total: int, new: float, elapsed: float) -> str:
        pct = f" ({100 * done / total:.0f}%)" if total else ""
        rate = new / elapsed if elapsed > 0 else 0.0
        eta = (f", ETA {_duration((total - done) / rate)}" if rate > 0 and done < total else
               ", done" if total and done >= total else "")
        return (f"[{time.strftime('%H:%M:%S')}] {stage}: {done}/{total}{pct}, {rate:.2f} {self.unit}/s, "
                f"elapsed {_duration(elapsed)}{eta}")


@contextmanager
def progress_output() -> Iterator[Progress]:
    """The progress callback of a long command: a live bar per stage on a terminal, else
    :class:`LogProgress` lines (on by default; nothing to set)."""
    if is_tty():
        with stage_progress() as bar:
            yield bar
    else:
        yield LogProgress()


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

    thread = threading.Thread(target=watch, name="agentrag-kb-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        look()  # the last line (100%) when the embedding finished



__all__ = ["LogProgress", "progress_output", "embedding_progress_lines", "PROGRESS_EVERY_S", "PROGRESS_EVERY_FRAC"]
