"""The retrieval server's token over real HTTP (issue 20): ``GET /health`` needs it too, so the
client's pre-check fails on a wrong token before the first item; a 401/403/404 from
``POST /retrieve`` is an EndpointError (the run stops), never a "search failed" observation;
connection refused and 5xx stay retryable RetrievalErrors (outages)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrag.errors import AgentRagError, EndpointError, RetrievalError, classify
from agentrag.kb import KBConfig, KnowledgeBase, RemoteRetriever
from agentrag.kb.server import create_app
from agentrag.records import Hit, Passage
from agentrag.testing import HashEmbedder

TOKEN = "s3cret"
DOCS = [("Paris", "Paris is the capital of France."), ("Toto", "Toto is an American rock band.")]


class _Server:
    """uvicorn on a free 127.0.0.1 port in a thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("retrieval server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    ps = [Passage(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    return KnowledgeBase.build(ps, tmp_path_factory.mktemp("auth") / "kb", KBConfig(name="wiki", method="bm25"),
                               embedder=HashEmbedder(16), progress=False)


@pytest.fixture(scope="module")
def url(kb: KnowledgeBase) -> Iterator[str]:
    server = _Server(create_app(kb, token=TOKEN))
    yield server.url
    server.stop()


def remote(url: str, token: str | None) -> RemoteRetriever:
    return RemoteRetriever(url, token=token, timeout=5, max_retries=2, backoff_initial=0.01, backoff_max=0.02)


def test_health_needs_the_token_when_the_server_has_one(url: str) -> None:
    assert httpx.get(url + "/health").status_code == 401
    assert httpx.get(url + "/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = httpx.get(url + "/health", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.json()["kb"] == "wiki"


def test_health_without_a_server_token_stays_open(kb: KnowledgeBase) -> None:
    server = _Server(create_app(kb))
    try:
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
        assert remote(server.url, "any").health()["passages"] == 2  # a token the server does not need is fine
    finally:
        server.stop()


@pytest.mark.parametrize("token", [None, "wrong"])
def test_client_pre_check_turns_a_rejected_token_into_an_endpoint_error(url: str, token: str | None) -> None:
    with pytest.raises(EndpointError) as e:
        remote(url, token).health()
    msg = str(e.value)
    assert e.value.status == 401 and e.value.endpoint == url
    assert f"the retrieval server at {url} rejected" in msg and "AGENTRAG_KB_TOKEN" in msg
    assert classify(e.value) == "fatal"
    assert remote(url, TOKEN).health()["status"] == "ok"


@pytest.mark.parametrize("token", [None, "wrong"])
def test_retrieve_401_is_an_endpoint_error_at_the_first_attempt(url: str, token: str | None) -> None:
    r = remote(url, token)
    with pytest.raises(EndpointError, match="rejected") as e:
        r.search(["Toto"], 1)
    assert e.value.status == 401 and r.attempts == 1  # no retry: none can fix a token
    assert not isinstance(e.value, RetrievalError)  # an agent tool cannot turn it into an observation
    assert remote(url, TOKEN).search(["Toto band"], 1)[0][0].id == "d1"


def test_retrieve_404_is_an_endpoint_error(url: str) -> None:
    r = remote(url + "/v1", TOKEN)  # POST /v1/retrieve: no such route
    with pytest.raises(EndpointError, match="404") as e:
        r.search(["Toto"], 1)
    assert e.value.status == 404 and r.attempts == 1 and "check the --kb URL" in str(e.value)


def test_403_from_a_proxy_is_an_endpoint_error() -> None:
    transport = httpx.MockTransport(lambda req: httpx.Response(403, text="forbidden by proxy"))
    r = RemoteRetriever("http://kb.example", token=TOKEN, client=httpx.Client(transport=transport), max_retries=3)
    for call in (r.health, lambda: r.search(["q"], 1)):
        with pytest.raises(EndpointError, match="rejected the token given") as e:
            call()
        assert e.value.status == 403
    assert r.attempts == 1


def test_connection_refused_and_5xx_stay_retryable_outages(kb: KnowledgeBase) -> None:
    refused = remote("http://127.0.0.1:9", None)
    with pytest.raises(RetrievalError) as e:
        refused.search(["q"], 1)
    assert e.value.is_retryable and refused.attempts == 3 and classify(e.value) == "outage"

    class Broken:
        config = kb.config

        def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
            raise AgentRagError("index file went away")

    server = _Server(create_app(Broken(), token=TOKEN))
    try:
        r = remote(server.url, TOKEN)
        with pytest.raises(RetrievalError, match="503") as e:
            r.search(["q"], 1)
        assert e.value.is_retryable and r.attempts == 3 and classify(e.value) == "outage"
    finally:
        server.stop()


def test_eval_with_a_wrong_token_stops_before_the_first_item(url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q0", "question": "who?", "golden_answers": ["Toto"]}) + "\n")
    monkeypatch.setenv("AGENTRAG_KB_TOKEN", "wrong")
    res = CliRunner().invoke(app, ["eval", "--dataset", str(data), "--kb", url, "--llm",
                                   "openai:m@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run")])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "rejected the token given" in out and "AGENTRAG_KB_TOKEN" in out, res.output
    assert not (tmp_path / "run" / "results.jsonl").exists()
