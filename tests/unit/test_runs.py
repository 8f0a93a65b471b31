from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from agentrag.config import Config
from agentrag.records import QAItem
from agentrag.runs import JsonlStore, RunDir

WRITER = r"""
import sys
from agentrag.records import QAItem
from agentrag.runs import JsonlStore
store = JsonlStore(sys.argv[1], QAItem)
n = int(sys.argv[2])
pad = "x" * 20000  # long lines make a torn write likely when killed
for i in range(n):
    rec = QAItem(id=f"q{i}", question=pad, golden_answers=[str(i)])
    if store.append(rec):
        sys.stdout.write(f"{i}\n"); sys.stdout.flush()
"""


def _read_ids(path):
    ids = []
    with open(path, "rb") as fh:
        for raw in fh:
            assert raw.endswith(b"\n"), "torn line left in file"
            ids.append(json.loads(raw)["id"])
    return ids


def test_sigkill_then_resume_no_torn_no_duplicates(tmp_path):
    path = tmp_path / "items.jsonl"
    n = 400
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n)], stdout=subprocess.PIPE)
    # wait until some records are written, then kill hard mid-stream
    assert proc.stdout is not None
    for _ in range(50):
        proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    partial = len(path.read_bytes().splitlines())
    assert 0 < partial < n, "kill should land mid-run"
    # rerun: resumes, repairs any torn tail, writes only the missing records
    done = subprocess.run([sys.executable, "-c", WRITER, str(path), str(n)], capture_output=True, check=True)
    written_again = [int(x) for x in done.stdout.split()]
    ids = _read_ids(path)
    assert len(ids) == len(set(ids)) == n
    assert set(ids) == {f"q{i}" for i in range(n)}
    assert min(written_again) >= 50 - 1  # records finished before the kill were not rewritten


def test_torn_last_line_is_dropped_with_warning(tmp_path, caplog):
    path = tmp_path / "x.jsonl"
    store = JsonlStore(path, QAItem)
    store.append(QAItem(id="a", question="q", golden_answers=["1"]))
    with path.open("ab") as fh:
        fh.write(b'{"id": "b", "question": "q", "golden_ans')
    store2 = JsonlStore(path, QAItem)
    assert "torn" in caplog.text
    assert store2.ids == {"a"}
    assert store2.append(QAItem(id="b", question="q", golden_answers=["2"]))
    assert [r.id for r in store2] == ["a", "b"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    from agentrag.errors import UserError

    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a", "question": "q", "golden_answers": []}\nnot json\n'
                    '{"id": "b", "question": "q", "golden_answers": []}\n')
    with pytest.raises(UserError, match="x.jsonl:2"):
        JsonlStore(path, QAItem)


def test_append_skips_existing_ids(tmp_path):
    store = JsonlStore(tmp_path / "x.jsonl", QAItem)
    rec = QAItem(id="a", question="q", golden_answers=[])
    assert store.append(rec) is True
    assert store.append(rec) is False
    assert len(store) == 1 and "a" in store


class _Cfg(Config):
    k: int = 1


def test_rundir_config_written_and_change_kept(tmp_path, caplog):
    run = RunDir(tmp_path / "run")
    run.write_config(_Cfg(k=1))
    assert "k: 1" in (run.path / "config.yaml").read_text()
    run.write_config(_Cfg(k=2))
    assert (run.path / "config.prev.yaml").exists()
    assert "differs" in caplog.text
