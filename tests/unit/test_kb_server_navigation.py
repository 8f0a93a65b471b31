"""Constrained navigation (RAGShaper Eq. 8) served over HTTP with per-trajectory state: 10,000
steps through the Search-R1 /retrieve API of a real server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.nav_state import TrajectoryNavigation
from agentrag.kb.server import create_app
from agentrag.records import Passage
from agentrag.testing import HashEmbedder

P_E = 0.5


def _kbs(root: Path) -> tuple[KnowledgeBase, KnowledgeBase]:
    emb = HashEmbedder(32)
    main = [Passage(id=f"k{i}", title=f"Town {i}", text=f"Town {i} was founded in {1800 + i} by merchant {i}.")
            for i in range(40)]
    tilde = [Passage(id=f"x{i}", title=f"Town {i} (draft)", text=f"In the draft, town {i} was founded in {1700 + i}.")
             for i in range(12)]
    return (KnowledgeBase.build(main, root / "k", KBConfig(name="main"), embedder=emb, progress=False),
            KnowledgeBase.build(tilde, root / "kt", KBConfig(name="distractor"), embedder=emb, progress=False))


@pytest.fixture()
def server_url(tmp_path: Path) -> Iterator[str]:
    import uvicorn

    main, tilde = _kbs(tmp_path)
    nav = TrajectoryNavigation(main, tilde, k_distractor=2, p_e=P_E, seed=7)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(create_app(main, navigation=nav, max_queries=512), host="127.0.0.1",
                                           port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)


def test_eq8_over_http_10000_steps(server_url: str) -> None:
    n_traj, n_steps = 100, 100  # 10,000 steps; one request carries one step of every trajectory
    ids = [f"rollout-{j}" for j in range(n_traj)]
    tilde_counts: dict[str, list[int]] = {t: [] for t in ids}
    with httpx.Client(base_url=server_url, timeout=30) as client:
        assert client.get("/health").json()["navigation"] == "constrained"
        for step in range(n_steps):
            body = {"queries": [f"town {(j * 7 + step) % 40} founded" for j in range(n_traj)], "topk": 5,
                    "return_scores": True, "trajectory_ids": ids}
            resp = client.post("/retrieve", json=body)
            assert resp.status_code == 200, resp.text
            for tid, docs in zip(ids, resp.json()["result"], strict=True):
                assert len(docs) == 5
                tilde_counts[tid].append(sum(d["document"]["id"].startswith("x") for d in docs))
    eligible = mixed = 0
    for counts in tilde_counts.values():
        assert counts[0] == 2  # t = 1: always R(K, k-2) U R(K~, 2)
        for prev, cur in zip(counts, counts[1:]):
            assert cur in (0, 2)
            if prev:
                assert cur == 0  # never K~ right after K~
            else:
                eligible += 1
                mixed += cur > 0
    assert eligible > 5000
    assert abs(mixed / eligible - P_E) <= 0.02, mixed / eligible


def test_trajectory_id_is_required_and_state_is_per_trajectory(tmp_path: Path) -> None:
    main, tilde = _kbs(tmp_path)
    client = TestClient(create_app(main, navigation=TrajectoryNavigation(main, tilde, p_e=0.0)))
    r = client.post("/retrieve", json={"queries": ["town 3"], "topk": 5})
    assert r.status_code == 422 and "trajectory_id" in r.json()["detail"]
    r = client.post("/retrieve", json={"queries": ["a", "b"], "trajectory_ids": ["t1"]})
    assert r.status_code == 422
    # one id for several queries: consecutive steps (p_e = 0: K~ only at step 1)
    r = client.post("/retrieve", json={"queries": ["town 3", "town 4", "town 5"], "topk": 5, "trajectory_id": "a"})
    got = [sum(d["id"].startswith("x") for d in docs) for docs in r.json()["result"]]
    assert got == [2, 0, 0]
    r = client.post("/retrieve", json={"queries": ["town 3"], "topk": 5, "trajectory_id": "b"})
    assert sum(d["id"].startswith("x") for d in r.json()["result"][0]) == 2  # a new trajectory starts at t = 1
    assert client.delete("/trajectories/a").json()["forgotten"] is True
    r = client.post("/retrieve", json={"queries": ["town 3"], "topk": 5, "trajectory_id": "a"})
    assert sum(d["id"].startswith("x") for d in r.json()["result"][0]) == 2  # forgotten: step 1 again


def test_navigation_app_applies_tau_to_k_and_k_tilde(tmp_path: Path) -> None:
    """Eq. 4's tau reaches the served navigation (issue 24 item 6): hits at or below it are dropped."""
    from agentrag.kb.serving import navigation_app

    main, tilde = _kbs(tmp_path)
    body = {"queries": ["Town 3 was founded in 1803 by merchant 3."], "topk": 5, "return_scores": True,
            "trajectory_id": "t"}
    plain = TestClient(navigation_app(main, tilde, p_e=0.0)).post("/retrieve", json=body).json()["result"][0]
    scores = sorted(d["score"] for d in plain)
    assert len(plain) == 5 and scores[0] < scores[-1]
    tau = (scores[-1] + scores[-2]) / 2 if scores[-1] > scores[-2] else scores[-1] - 1e-6
    cut = TestClient(navigation_app(main, tilde, p_e=0.0, threshold=tau)).post("/retrieve", json=body)
    kept = cut.json()["result"][0]
    assert 1 <= len(kept) < 5 and all(d["score"] > tau for d in kept)


def test_kb_serve_takes_tau_for_constrained_navigation_only(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from agentrag.cli.main import app
    from agentrag.kb import serving

    main, tilde = _kbs(tmp_path)
    started: list[float | None] = []
    monkeypatch.setattr(serving, "serve_navigation", lambda *a, **k: started.append(k["threshold"]))
    args = ["kb", "serve", str(main.directory), "--navigation", "constrained", "--distractors", str(tilde.directory),
            "--method", "bm25"]  # the KB's hash embedder is not loadable from its directory
    res = CliRunner().invoke(app, [*args, "--tau", "0.8"])
    assert res.exit_code == 0, res.output
    assert CliRunner().invoke(app, args).exit_code == 0
    assert started == [0.8, None]
    res = CliRunner().invoke(app, ["kb", "serve", str(main.directory), "--method", "bm25", "--tau", "0.8"])
    assert res.exit_code == 2 and "--tau" in res.output and started == [0.8, None]
