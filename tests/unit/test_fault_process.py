"""The process faults against eval and every synthesizer, with the stub endpoint:

- kill -9 mid-run (the stub SIGKILLs the command's process when a request arrives): the rerun
  resumes and finishes, and only the request the kill cut is asked again;
- the first Ctrl-C mid-run: exit 3 within seconds, the finished work is kept, and the rerun
  finishes paying nothing twice;
- two writers: a command on a run directory another process is writing stops at once with one
  line naming that process, exit 2, nothing written, nothing asked;
- a read-only output (the run directory on a read-only file system, existing or to be made): one
  line naming it, exit 2, nothing asked.

The command runs as the ``agentrag`` program in its own process (:mod:`fault_child`) for the
signals, and in-process otherwise."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from disk_faults import ReadOnly
from test_eval_failures import one_error_line
from test_fault_disk_synth import WORLDS
from test_fault_matrix import ALL
from typer.testing import CliRunner

from agentrag.errors import EXIT_BAD_INPUT, EXIT_UNFINISHED

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "fault_child.py"
#: eval and every synthesizer (synth annotated calls no LLM: nothing to interrupt it at)
EVERY = {**ALL, "annotated": WORLDS["annotated"]}
_BASELINE: dict[str, int] = {}  # requests of one healthy run, per world (the worlds are deterministic)


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _baseline(world: str, srv: Any, run: Callable[[Path], Any], tmp: Path) -> int:
    """Requests of a healthy run of ``world`` (counted once per session); the stub's count is reset."""
    if world not in _BASELINE:
        res = run(tmp / "baseline")
        assert res.exit_code == 0, res.output
        _BASELINE[world] = srv.requests
    srv.requests = 0
    return _BASELINE[world]


def _argv(run: Callable[[Path], Any], out: Path) -> list[str]:
    """The command line ``run(out)`` gives the CLI."""
    seen: list[list[str]] = []

    def invoke(self: CliRunner, app: Any, args: Any = None, **kwargs: Any) -> Any:
        seen.append([str(a) for a in args])
        return SimpleNamespace(exit_code=0, output="")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CliRunner, "invoke", invoke)
        run(out)
    assert len(seen) == 1
    return seen[0]


def _spawn(world: str, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), world, json.dumps(argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env())


def _records(out: Path) -> int:
    """Finished records in the run directory's stage files and eval results."""
    return sum(1 for p in out.glob("*.jsonl") for line in p.read_text().splitlines() if line.strip())


@pytest.mark.parametrize("world", list(ALL))
def test_kill_9_mid_run_then_the_rerun_resumes_and_pays_nothing_twice(world, tmp_path, monkeypatch):
    out = tmp_path / "run"
    with ALL[world](tmp_path, monkeypatch) as (srv, run):
        base = _baseline(world, srv, run, tmp_path)
        at = max(2, base // 2)
        srv.kill_client_at = at
        proc = _spawn(world, _argv(run, out))
        output = proc.communicate(timeout=120)[0]
        assert proc.returncode == -signal.SIGKILL, output
        assert srv.requests == at
        srv.kill_client_at = None
        res = run(out)  # the lock went with the killed process
        assert res.exit_code == 0, res.output
        assert srv.requests <= base + 1  # only the request the kill cut is asked again
    assert "Traceback" not in res.output


@pytest.mark.parametrize("world", list(ALL))
def test_first_ctrl_c_exits_3_keeps_finished_work_and_the_rerun_pays_nothing_twice(world, tmp_path, monkeypatch):
    out = tmp_path / "run"
    with ALL[world](tmp_path, monkeypatch) as (srv, run):
        base = _baseline(world, srv, run, tmp_path)
        at = base  # Ctrl-C while the last request is pending: most of the work is finished by then
        real = srv.reply

        def slow_from_at(body: dict[str, Any]) -> Any:
            if srv.requests >= at:  # the command is waiting on this reply when Ctrl-C comes
                time.sleep(1.5)
            return real(body)

        srv.reply = slow_from_at
        proc = _spawn(world, _argv(run, out))
        try:
            deadline = time.monotonic() + 90
            while srv.requests < at:
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "the command sent too few requests"
                time.sleep(0.05)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            output = proc.communicate(timeout=30)[0]
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        srv.reply = real
        assert proc.returncode == EXIT_UNFINISHED, output
        assert took < 10, (took, output)
        assert "stopping: " in output and "Traceback" not in output, output
        kept = _records(out)
        assert kept >= 1, output  # the work finished before Ctrl-C is on disk
        paid = srv.requests
        res = run(out)
        assert res.exit_code == 0, res.output
        assert srv.requests <= base + 1, (paid, srv.requests, base)  # at most the one cut is asked again


def _hold_lock(out: Path) -> subprocess.Popen[str]:
    script = textwrap.dedent(f"""
        import time
        from agentrag.runs import RunDir
        RunDir({str(out)!r})
        print("locked", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("world", list(EVERY))
def test_a_second_writer_is_refused_at_once_with_exit_2(world, tmp_path, monkeypatch):
    out = tmp_path / "run"
    holder = _hold_lock(out)
    try:
        with EVERY[world](tmp_path, monkeypatch) as (srv, run):
            res = run(out)
            assert srv.requests == 0
    finally:
        holder.kill()
        holder.wait()
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    line = one_error_line(res.output)
    assert f"is being written by process {holder.pid}" in line and str(out) in line, line
    assert [p.name for p in out.iterdir()] == [".agentrag.lock"]  # nothing written beside the other's lock


@pytest.mark.parametrize("exists", [True, False], ids=["existing", "new"])
@pytest.mark.parametrize("world", list(EVERY))
def test_a_read_only_output_is_one_line_and_exit_2(world, exists, tmp_path, monkeypatch):
    out = tmp_path / "run"
    if exists:
        out.mkdir()
    with EVERY[world](tmp_path, monkeypatch) as (srv, run):
        ro = ReadOnly(monkeypatch, out)
        res = run(out)
        assert srv.requests == 0
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    line = one_error_line(res.output)
    assert "read-only" in line and str(out) in line, line
    assert ro.refused
    assert not out.exists() or not any(out.iterdir())
