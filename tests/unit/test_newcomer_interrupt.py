"""Ctrl-C on a real ``agentrag eval`` process (issue 28): the first one says how many items are in
flight, abandons them, keeps every finished item and exits within seconds with 3 (unfinished);
a second one exits at once with 130. The agent LLM is a slow OpenAI-compatible stub (2 s a call)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_eval_outages import PASSAGES, ServerThread, stub_reply

from agentrag.errors import EXIT_INTERRUPTED, EXIT_UNFINISHED
from agentrag.testing import FakeRetriever, StubOpenAIServer

REPO = Path(__file__).resolve().parents[2]


def _dataset(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in range(n)))
    return path


def _rows(out: Path) -> list[str]:
    path = out / "results.jsonl"
    return [json.loads(x)["id"] for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _start(tmp_path: Path, url: str, kb_url: str) -> tuple[subprocess.Popen[str], Path]:
    llm = tmp_path / "agent.yaml"
    llm.write_text(f"backend: openai\nmodel: stub\nbase_url: {url}\ntimeout: 30\nmax_retries: 0\n")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "agentrag", "eval", "--dataset", str(_dataset(tmp_path, 8)),
                             "--kb", kb_url, "--agent", "plan_step", "--llm", str(llm), "-j", "2", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return proc, out


def _wait_for_rows(proc: subprocess.Popen[str], out: Path, n: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(_rows(out)) < n:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "no result written in time"
        time.sleep(0.2)


def test_first_ctrl_c_stops_in_seconds_keeps_finished_items_and_exits_unfinished(tmp_path):
    server = ServerThread(FakeRetriever(PASSAGES)).start()
    try:
        with StubOpenAIServer(reply=stub_reply, latency=2.0) as srv:
            proc, out = _start(tmp_path, srv.base_url, server.url)
            try:
                _wait_for_rows(proc, out, 1)
                sent = time.monotonic()
                proc.send_signal(signal.SIGINT)
                output, _ = proc.communicate(timeout=30)
                took = time.monotonic() - sent
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        server.stop()
    assert proc.returncode == EXIT_UNFINISHED, output
    assert took < 10, (took, output)
    assert "stopping: " in output and " in flight" in output, output
    assert "Traceback" not in output, output
    kept = _rows(out)
    assert 1 <= len(kept) < 8 and len(set(kept)) == len(kept)  # every finished item kept, once


def test_second_ctrl_c_exits_at_once_with_130(tmp_path):
    server = ServerThread(FakeRetriever(PASSAGES)).start()
    try:
        with StubOpenAIServer(reply=stub_reply, latency=2.0) as srv:
            proc, out = _start(tmp_path, srv.base_url, server.url)
            try:
                _wait_for_rows(proc, out, 1)
                proc.send_signal(signal.SIGINT)
                time.sleep(0.05)
                sent = time.monotonic()
                proc.send_signal(signal.SIGINT)
                output, _ = proc.communicate(timeout=30)
                took = time.monotonic() - sent
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        server.stop()
    assert proc.returncode in (EXIT_INTERRUPTED, EXIT_UNFINISHED), output  # 3 if the first one had already exited
    assert took < 5, (took, output)
    assert len(_rows(out)) >= 1
