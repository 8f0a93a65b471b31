"""A full or failing disk is named as a disk error (issue: hardening), for the LLM cache, the stage
files and the reports: one line, exit 2, no traceback, nothing paid twice on the rerun, and the
cache advised for moving aside only when SQLite's integrity check proves it corrupt. The disk is
simulated (:mod:`disk_faults`): writes fail with ENOSPC, the cache's SQLite with SQLITE_FULL/IOERR."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from disk_faults import FullDisk
from test_eval_failures import dataset, eval_args, fake_kb, llm_yaml, results  # noqa: F401
from test_eval_outages import stub_reply
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import EXIT_BAD_INPUT, StorageError, classify, is_disk_error
from agentrag.llm.cache import CachedLLM, ResponseCache, flush_unsaved
from agentrag.records import Message
from agentrag.testing import ScriptedLLM, StubOpenAIServer

runner = CliRunner()
Q = [Message(role="user", content="q")]


def disk_error_line(output: str, *words: str) -> str:
    """The command's one error line (no traceback, no "bug"), which names the disk and ``words``."""
    assert "Traceback" not in output and "bug" not in output, output
    lines = [x for x in output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, output
    line = " ".join(output[output.index("error:"):].split())
    assert "delete" not in line and "corrupt" not in line, line
    for w in words:
        assert w in line, line
    return line


# -- the cache itself ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,says", [("full", "the disk is full"), ("io", "disk I/O error")])
def test_a_cache_on_a_failing_disk_is_a_disk_error_never_corrupt(tmp_path, monkeypatch, kind, says):
    path = tmp_path / "llm_cache.sqlite"
    CachedLLM(ScriptedLLM(["paid"]), path).chat(Q)
    size = path.stat().st_size
    FullDisk(monkeypatch, cache=True, cache_error=kind)
    with pytest.raises(StorageError) as err:
        ResponseCache(path)
    msg = str(err.value)
    assert says in msg and "llm_cache.sqlite" in msg and "rerun" in msg
    assert "delete" not in msg and "corrupt" not in msg and "\n" not in msg
    assert path.stat().st_size == size  # kept as it was


def test_only_a_file_the_integrity_check_rejects_is_called_corrupt(tmp_path):
    path = tmp_path / "llm_cache.sqlite"
    path.write_bytes(b"this is not a database" * 300)
    with pytest.raises(Exception) as err:
        ResponseCache(path)
    assert not isinstance(err.value, StorageError)
    assert "is corrupt" in str(err.value) and "move it aside" in str(err.value)


def test_a_reply_the_disk_refuses_is_held_served_again_and_written_later(tmp_path, monkeypatch):
    path = tmp_path / "c.sqlite"
    inner = ScriptedLLM(["paid once"], default="second")
    disk = FullDisk(monkeypatch, cache=True, full=False)
    llm = CachedLLM(inner, path)
    disk.full = True
    assert llm.chat(Q)[0].text == "paid once"  # paid for: the caller gets it
    assert llm.chat(Q)[0].text == "paid once" and llm.inner_calls == 1  # held in memory, not asked again
    with pytest.raises(StorageError, match="held in memory"):  # no new request while the disk refuses
        llm.chat([Message(role="user", content="another")])
    assert llm.inner_calls == 1
    disk.full = False
    assert flush_unsaved() == 0
    again = CachedLLM(ScriptedLLM([]), path)
    assert again.chat(Q)[0].text == "paid once" and again.inner_calls == 0


def test_disk_errors_are_fatal_never_bugs_with_or_without_a_file_name():
    import errno
    import sqlite3

    from disk_faults import sqlite_error

    for exc in (OSError(errno.ENOSPC, "No space left on device"), OSError(errno.EIO, "Input/output error"),
                sqlite_error("full"), sqlite_error("io")):
        assert is_disk_error(exc) and classify(exc) == "fatal", exc
    assert not is_disk_error(sqlite3.OperationalError("no such table: x"))
    assert classify(OSError(errno.EACCES, "Permission denied")) == "bug"  # no file named: not a disk error


# -- eval, through the CLI --------------------------------------------------------------------------
def _eval(tmp_path: Path, srv: StubOpenAIServer, out: Path, n: int = 3) -> Any:
    return runner.invoke(app, eval_args(dataset(tmp_path, n), out, llm_yaml(tmp_path, "agent", srv.base_url)))


@pytest.fixture()
def baseline(tmp_path, fake_kb) -> int:  # noqa: F811
    """Requests an uninterrupted eval of the 3 questions makes."""
    with StubOpenAIServer(reply=stub_reply) as srv:
        assert _eval(tmp_path, srv, tmp_path / "baseline").exit_code == 0
        return srv.requests


def test_eval_cache_full_mid_run_stops_with_one_line_and_asks_for_nothing_more(tmp_path, monkeypatch, baseline):
    out = tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        disk = FullDisk(monkeypatch, cache=True, full=False)
        real_reply = srv.reply

        def fill_disk_after_first(body: dict[str, Any]) -> Any:
            disk.full = True
            return real_reply(body)

        srv.reply = fill_disk_after_first
        res = _eval(tmp_path, srv, out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        disk_error_line(res.output, "llm_cache.sqlite", "the disk is full", "held in memory")
        assert srv.requests == 1  # the run stopped before asking for more
        disk.full = False
        srv.reply = real_reply
        res = _eval(tmp_path, srv, out)
    assert res.exit_code == 0, res.output
    assert sorted(r["id"] for r in results(out)) == ["q0", "q1", "q2"]
    # the one reply in memory when the command ended on a still-full disk is asked again; nothing else
    assert srv.requests == baseline + 1


def test_eval_cache_full_for_a_moment_holds_the_reply_and_loses_nothing(tmp_path, monkeypatch, baseline):
    out = tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        disk = FullDisk(monkeypatch, cache=True, full=False, fail_times=1)
        real_reply = srv.reply

        def fill_once(body: dict[str, Any]) -> Any:
            if srv.requests == 2:
                disk.full = True
            return real_reply(body)

        srv.reply = fill_once
        res = _eval(tmp_path, srv, out)
        assert res.exit_code == 0, res.output
        assert disk.writes_failed == 1
        first = srv.requests
        res = _eval(tmp_path, srv, out)
    assert res.exit_code == 0, res.output
    assert first == baseline and srv.requests == baseline  # the rerun pays nothing


@pytest.mark.parametrize("kind,says", [("full", "the disk is full"), ("io", "disk I/O error")])
def test_eval_cache_on_a_full_disk_at_start(tmp_path, monkeypatch, fake_kb, kind, says):  # noqa: F811
    out = tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        FullDisk(monkeypatch, cache=True, cache_error=kind)
        res = _eval(tmp_path, srv, out)
        assert srv.requests == 0
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    disk_error_line(res.output, "llm_cache.sqlite", says)


@pytest.mark.parametrize("name", ["results.jsonl", "report.md", "report.html", "metrics.json.tmp"])
def test_eval_file_on_a_full_disk_is_one_line_and_the_rerun_pays_nothing_twice(tmp_path, monkeypatch, baseline,
                                                                             name):
    out = tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        disk = FullDisk(monkeypatch, files=lambda n: n in (name, name + ".tmp"))
        res = _eval(tmp_path, srv, out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        disk_error_line(res.output, name.removesuffix(".tmp"), "the disk is full")
        assert disk.writes_failed >= 1
        disk.full = False
        res = _eval(tmp_path, srv, out)
    assert res.exit_code == 0, res.output
    assert sorted(r["id"] for r in results(out)) == ["q0", "q1", "q2"]
    assert srv.requests == baseline  # every reply paid once, before or after the disk filled
    assert json.loads((out / "metrics.json").read_text())["n"] == 3
