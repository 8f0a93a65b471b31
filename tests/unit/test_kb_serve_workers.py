"""`agentrag kb serve --workers N`: N processes on one port, each loading the KB read-only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.records import Passage
from agentrag.testing import HashEmbedder

NAMES = ["".join(chr(97 + d) for d in (i % 26, i // 26, (i * 5) % 26, (i * 11) % 26)) + "ville" for i in range(30)]
PASSAGES = [Passage(id=f"p{i}", title=name.title(), text=f"{name.title()} lies on a river.")
            for i, name in enumerate(NAMES)]


@pytest.fixture()
def kb_dir(tmp_path):
    KnowledgeBase.build(PASSAGES, tmp_path / "kb", KBConfig(method="bm25"), embedder=HashEmbedder(), progress=False)
    return tmp_path / "kb"


def test_app_factory_reads_its_settings_from_the_environment(kb_dir, monkeypatch):
    from fastapi.testclient import TestClient

    from agentrag.kb.server import SERVE_ENV, app_from_env

    monkeypatch.setenv(SERVE_ENV, json.dumps({"kb": str(kb_dir), "method": "bm25", "topk": 2}))
    monkeypatch.setenv("AGENTRAG_KB_TOKEN", "s3")
    client = TestClient(app_from_env())
    assert client.post("/retrieve", json={"queries": [NAMES[7]]}).status_code == 401
    res = client.post("/retrieve", json={"queries": [NAMES[7]]}, headers={"Authorization": "Bearer s3"})
    docs = res.json()["result"][0]
    assert 1 <= len(docs) <= 2 and docs[0]["id"] == "p7"
    assert client.get("/health").status_code == 401  # the token guards /health too
    assert client.get("/health", headers={"Authorization": "Bearer s3"}).json()["method"] == "bm25"


@pytest.mark.slow
def test_serve_with_two_worker_processes(kb_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "agentrag.cli.main", "kb", "serve", str(kb_dir), "--port",
                             str(port), "--method", "bm25", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        for i in range(40):  # new connections: the kernel spreads them over the processes
            r = httpx.post(url + "/retrieve", json={"queries": [NAMES[i % 30]], "topk": 1}, timeout=10)
            assert r.json()["result"][0][0]["id"] == f"p{i % 30}"
        with httpx.Client(base_url=url, timeout=10) as client:  # keep-alive: no ~40 ms Nagle/delayed-ACK stall
            times = []
            for i in range(21):
                t0 = time.perf_counter()
                assert client.post("/retrieve", json={"query": NAMES[i % 30], "top_k": 1}).status_code == 200
                times.append(time.perf_counter() - t0)
            assert sorted(times)[10] < 0.025, times
        import psutil

        pids = {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        assert len(pids) >= 2  # the uvicorn supervisor's worker processes
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert b"with 2 worker processes" in proc.stderr.read()


def test_workers_refused_with_constrained_navigation(kb_dir, tmp_path, monkeypatch):
    """Constrained navigation keeps per-trajectory state in one process: --workers 2 is a UserError
    (exit 2, named options) and no server is started."""
    from typer.testing import CliRunner

    import agentrag.kb.server as server
    import agentrag.kb.serving as serving
    from agentrag.cli.main import app

    started: list[str] = []
    monkeypatch.setattr(server, "serve", lambda *a, **k: started.append("serve"))
    monkeypatch.setattr(server, "serve_workers", lambda *a, **k: started.append("serve_workers"))
    monkeypatch.setattr(serving, "serve_navigation", lambda *a, **k: started.append("serve_navigation"))
    res = CliRunner().invoke(app, ["kb", "serve", str(kb_dir), "--method", "bm25", "--workers", "2",
                                   "--navigation", "constrained", "--distractors", str(kb_dir)])
    assert res.exit_code == 2, res.output
    assert "--workers 2 with --navigation constrained" in res.output
    assert started == []
    # one worker with constrained navigation is accepted (the server itself is not started here)
    res = CliRunner().invoke(app, ["kb", "serve", str(kb_dir), "--method", "bm25", "--workers", "1",
                                   "--navigation", "constrained", "--distractors", str(kb_dir)])
    assert res.exit_code == 0, res.output
    assert started == ["serve_navigation"]
