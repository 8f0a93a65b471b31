"""Output into a file or a pipe: log lines are never wrapped, `--help` comes out whole (no "…"),
`kb search --json` is JSONL; `--port 0` serves on a free port it prints; `--print-config` shows
what a default concurrency resolves to. Each through the real entry point in a subprocess (its
stdout and stderr are pipes, as under nohup or `| less`)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _agentrag(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80"}
    env.pop("TERMINAL_WIDTH", None)
    return subprocess.run([sys.executable, "-m", "agentrag", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def test_piped_help_is_whole():
    r = _agentrag("eval", "--help")
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.stdout).split())
    for phrase in ("--force-new-config", "--print-config", "Print the fully resolved configuration (YAML: every key,",
                   "write this run to a new directory beside it (OUT.2, OUT.3, ...) instead of refusing"):
        assert phrase in flat, phrase


def test_log_lines_are_not_wrapped_when_not_a_terminal(capsys):
    from agentrag.cli.common import setup_logging

    setup_logging()
    try:
        long = "word " * 60 + "end-of-a-long-line"
        logging.getLogger("agentrag.test").info(long)
        err = capsys.readouterr().err
        line = next(ln for ln in err.splitlines() if "end-of-a-long-line" in ln)
        assert long.strip() in line and "INFO" in line
    finally:
        logging.basicConfig(force=True)


def test_kb_search_json_is_jsonl(tmp_path):
    from agentrag.kb import build_kb

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"Toto {i}", "text": "Toto is a band founded by Jeff Porcaro "
                                          + "and friends " * 20}) + "\n" for i in range(4)))
    build_kb(corpus, tmp_path / "kb", method="bm25", progress=False)
    r = _agentrag("kb", "search", "--kb", str(tmp_path / "kb"), "who founded Toto", "band", "--top-k", "2", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]  # every line one object
    assert len(rows) == 4 and {row["query"] for row in rows} == {"who founded Toto", "band"}
    assert all(row["title"].startswith("Toto") and "score" in row for row in rows)


def test_print_config_shows_the_resolved_concurrency(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q", "question": "q?", "golden_answers": ["a"]}) + "\n")
    r = CliRunner().invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o"),
                                 "--print-config"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if ln.startswith("concurrency:"))
    assert re.fullmatch(r"concurrency: null  # resolved: \d+ items in flight .*", line), line
    r = CliRunner().invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o"),
                                 "-j", "3", "--print-config"])
    assert "concurrency: 3\n" in r.output


@pytest.mark.parametrize("group", ["kb"])
def test_port_0_serves_on_a_free_port_it_prints(tmp_path, group):
    import urllib.request

    from agentrag.kb import build_kb

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"T{i}", "text": f"text {i}"}) + "\n" for i in range(4)))
    build_kb(corpus, tmp_path / "kb", method="bm25", progress=False)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-m", "agentrag", "kb", "serve", "--kb", str(tmp_path / "kb"),
                             "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        url = None
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            m = re.search(r"on (http://127\.0\.0\.1:(\d+))", line)
            if m:
                url = m.group(1)
                assert int(m.group(2)) > 0
        assert url, "no 'serving ... on http://...' line"
        for _ in range(200):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                    assert json.loads(resp.read())["status"] == "ok"
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"nothing answers on {url}")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
