"""The heartbeat of long stages: one plain line when a stage starts, then at least every
:data:`HEARTBEAT_S` seconds whether or not an item finished (done/total, the rate over the last
:data:`RATE_WINDOW_S` seconds, ETA once a rate is measurable), and one at its end.

Every long call (``run_eval``, ``run_*``, ``build_kb``, ``train_*``) takes ``progress``: ``True``
(these lines on stderr), ``False`` (none), a callback ``(stage, done, total)`` of your own, or
``None`` (the default: the lines when the session is interactive — a terminal, a Python prompt or
a notebook — else none). The CLI uses the same lines when its output is not a terminal.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Union

#: a heartbeat line at least this often (seconds) while a stage runs
HEARTBEAT_S = 30.0
#: ... and one every this fraction of a stage, but no sooner than :data:`MIN_GAP_S` after the last
EVERY_FRAC = 0.05
MIN_GAP_S = 5.0
#: the rate is measured over this many recent seconds (a slow start does not drag it down for good)
RATE_WINDOW_S = 120.0

Progress = Callable[[str, int, int], None]
ProgressArg = Union[bool, Progress, None]


def duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _count(done: int, total: int) -> str:
    """``done/total (pct%)``; just ``done`` while the total is unknown (0, a stream being read)."""
    return f"{done}/{total} ({100 * done / total:.0f}%)" if total else str(done)


def _stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@dataclass
class _Stage:
    t0: float
    done0: int
    done: int
    total: int
    last_t: float
    last_done: int
    samples: deque[tuple[float, int]] = field(default_factory=deque)
    ended: bool = False


class Heartbeat:
    """A progress callback ``(stage, done, total)`` that writes plain lines through ``emit``: a
    stage's first call prints "started" at once; then a line whenever :data:`EVERY_FRAC` of the
    stage finished (at most one per :data:`MIN_GAP_S`), at its end, and — from :meth:`tick`, which
    the ticker thread of :meth:`running` calls every second — whenever ``every_s`` passed since the
    stage's last line, so a stage whose items take minutes still says it is alive. Rates count this
    run's items over the last ``window_s`` seconds; a stage with no measured item shows no ETA."""

    def __init__(self, emit: Callable[[str], None] | None = None, *, every_s: float = HEARTBEAT_S,
                 every_frac: float = EVERY_FRAC, window_s: float = RATE_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic, unit: str = "items",
                 stamp: Callable[[], str] = lambda: time.strftime("%H:%M:%S")):
        self.emit = emit or _stderr_line
        self.every_s, self.every_frac, self.window_s, self.clock, self.unit = every_s, every_frac, window_s, clock, unit
        self.stamp = stamp
        self.min_gap_s = min(MIN_GAP_S, every_s)
        self._stages: dict[str, _Stage] = {}
        self._lock = threading.Lock()

    # -- the callback -------------------------------------------------------------------------
    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        with self._lock:
            line = self._update(stage, done, total, now)
        if line is not None:
            self.emit(line)

    def _update(self, stage: str, done: int, total: int, now: float) -> str | None:
        st = self._stages.get(stage)
        if st is None:  # first sight: say the stage started (a resumed one from where it is)
            st = self._stages[stage] = _Stage(t0=now, done0=done, done=done, total=total, last_t=now, last_done=done)
            st.samples.append((now, done))
            return f"[{self.stamp()}] {stage}: {_count(done, total)}, started"
        st.total = total
        if done != st.done:
            st.done = done
            st.samples.append((now, done))
        finished = total > 0 and done >= total
        if finished and st.ended:
            return None
        if not finished:  # a stage whose total grew again (a flow's follow-ups) beats again
            st.ended = False
        frac_step = (done - st.last_done) / total if total else 0.0
        since = now - st.last_t
        if not (finished or since >= self.every_s or (frac_step >= self.every_frac and since >= self.min_gap_s)):
            return None
        st.ended = finished
        return self._line(stage, st, now)

    # -- the heartbeat ------------------------------------------------------------------------
    def tick(self) -> None:
        """Print a line for every running stage whose last line is ``every_s`` old."""
        now = self.clock()
        lines = []
        with self._lock:
            for name, st in self._stages.items():
                if not st.ended and now - st.last_t >= self.every_s:
                    lines.append(self._line(name, st, now))
        for line in lines:
            self.emit(line)

    @contextmanager
    def running(self, tick_s: float = 1.0) -> Iterator[Heartbeat]:
        """Tick from a daemon thread while the block runs (stopped and joined on exit)."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(tick_s):
                self.tick()

        thread = threading.Thread(target=beat, name="agentrag-heartbeat", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    # -- one line -----------------------------------------------------------------------------
    def rate(self, st: _Stage, now: float) -> float | None:
        """Items per second over the last ``window_s`` seconds (from the newest sample at or before
        the window's start, else the stage's start); None before anything was measured."""
        while len(st.samples) > 1 and st.samples[1][0] <= now - self.window_s:
            st.samples.popleft()
        t_old, d_old = st.samples[0]
        if st.done <= st.done0 or now <= t_old:
            return None
        return (st.done - d_old) / (now - t_old)

    def _line(self, stage: str, st: _Stage, now: float) -> str:
        st.last_t, st.last_done = now, st.done
        done, total = st.done, st.total
        rate = self.rate(st, now)
        head = f"[{self.stamp()}] {stage}: {_count(done, total)}, "
        elapsed = f"elapsed {duration(now - st.t0)}"
        if total and done >= total:
            return head + (f"{self._rate(rate)}, " if rate else "") + elapsed + ", done"
        if rate is None:
            return head + f"first {self.unit} still running, {elapsed}"
        if rate <= 0:
            return head + f"none finished in the last {duration(self.window_s)}, {elapsed}"
        eta = f", ETA {duration((total - done) / rate)}" if total else ""
        return head + f"{self._rate(rate)}, {elapsed}{eta}"

    def _rate(self, rate: float) -> str:
        """Per second, or per minute for a slow stage (minutes an item: never "0.00 items/s")."""
        return f"{rate:.2f} {self.unit}/s" if rate >= 0.1 else f"{60 * rate:.2f} {self.unit}/min"


def interactive() -> bool:
    """A terminal on stderr, a Python prompt (``python -i``, the REPL) or a notebook kernel."""
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return True
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_for(progress: ProgressArg, unit: str = "items") -> Iterator[Progress | None]:
    """The callback a library call uses for its ``progress`` argument (module docstring): a
    :class:`Heartbeat` with its ticker for ``True`` (or ``None`` when :func:`interactive`), the
    caller's callback as given, nothing for ``False``."""
    if callable(progress):
        yield progress
        return
    if progress is None:
        progress = interactive()
    if not progress:
        yield None
        return
    hb = Heartbeat(unit=unit)
    with hb.running():
        yield hb


__all__ = ["Heartbeat", "ProgressArg", "progress_for", "HEARTBEAT_S", "RATE_WINDOW_S"]
