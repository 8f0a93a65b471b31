import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient

from agentrag.errors import RetrievalError
from agentrag.kb import KBConfig, KnowledgeBase, RemoteRetriever, resolve_retriever
from agentrag.kb.server import create_app
from agentrag.records import Passage
from agentrag.testing import HashEmbedder

DOCS = [("Paris", "Paris is the capital of France."), ("Toto", "Toto is an American rock band."),
        ("Jeff Porcaro", "Jeff Porcaro was the drummer of Toto."), ("Everest", "Everest is a mountain.")]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    ps = [Passage(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    return KnowledgeBase.build(ps, tmp_path_factory.mktemp("s") / "kb", KBConfig(name="wiki"),
                               embedder=HashEmbedder(32), progress=False)


@pytest.fixture(scope="module")
def client(kb):
    return TestClient(create_app(kb, max_topk=10, max_queries=4, max_query_chars=50))


def test_search_r1_client_request_shape(client):
    # exactly what Search-R1's generation loop posts: {"queries", "topk", "return_scores": True}
    payload = {"queries": ["Jeff Porcaro drummer", "capital of France"], "topk": 3, "return_scores": True}
    resp = client.post("/retrieve", json=payload)
    assert resp.status_code == 200
    result = resp.json()["result"]
    assert len(result) == 2 and all(len(r) == 3 for r in result)
    for item in result[0]:
        assert set(item) == {"document", "score"} and set(item["document"]) == {"id", "contents"}
        assert isinstance(item["score"], float)
    content = result[0][0]["document"]["contents"]
    title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
    assert (title, text) == ("Jeff Porcaro", "Jeff Porcaro was the drummer of Toto.")


def test_without_scores_returns_documents(client):
    resp = client.post("/retrieve", json={"queries": ["Everest mountain"], "topk": 1, "return_scores": False})
    assert resp.json() == {"result": [[{"id": "d3", "contents": "Everest\nEverest is a mountain."}]]}
    default = client.post("/retrieve", json={"queries": ["Everest mountain"]}).json()["result"][0]
    assert len(default) == 3 and set(default[0]) == {"id", "contents"}


BAD = [
    ("not json", None),
    (None, {"topk": 2}),
    (None, {"queries": "one string", "topk": 2}),
    (None, {"queries": [], "topk": 2}),
    (None, {"queries": ["ok", ""], "topk": 2}),
    (None, {"queries": ["ok"], "topk": 0}),
    (None, {"queries": ["ok"], "topk": 11}),
    (None, {"queries": ["ok"], "topk": "3"}),
    (None, {"queries": ["a", "b", "c", "d", "e"], "topk": 1}),
    (None, {"queries": ["x" * 51], "topk": 1}),
    (None, {"queries": [5], "topk": 1}),
]


@pytest.mark.parametrize("raw, body", BAD)
def test_malformed_request_gets_4xx_with_reason_then_good_request_works(client, raw, body):
    if raw is not None:
        resp = client.post("/retrieve", content=raw, headers={"content-type": "application/json"})
    else:
        resp = client.post("/retrieve", json=body)
    assert 400 <= resp.status_code < 500
    assert resp.json()["detail"]
    good = client.post("/retrieve", json={"queries": ["Toto band"], "topk": 1, "return_scores": True})
    assert good.status_code == 200 and good.json()["result"][0][0]["document"]["id"] == "d1"


def test_health(client):
    assert client.get("/health").json() == {"status": "ok", "kb": "wiki", "passages": 4, "method": "hybrid"}


def test_bearer_token(kb):
    c = TestClient(create_app(kb, token="s3cret"))
    body = {"queries": ["Toto"], "topk": 1}
    assert c.post("/retrieve", json=body).status_code == 401
    assert c.post("/retrieve", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/retrieve", json=body, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    remote = RemoteRetriever("http://testserver", token="s3cret", client=c, kb="w")
    assert remote.search(["Toto"], 1)[0][0].id == "d1"


def test_remote_retriever_round_trip(kb, client):
    remote = RemoteRetriever("http://testserver", client=client, kb="remote-wiki")
    local = kb.search(["drummer of Toto", "capital of France"], 2)
    got = remote.search(["drummer of Toto", "capital of France"], 2)
    assert [[(h.id, h.title, h.text) for h in r] for r in got] == [[(h.id, h.title, h.text) for h in r] for r in local]
    assert all(h.kb == "remote-wiki" and h.method == "remote" for h in got[0])
    assert [h.score for h in got[0]] == pytest.approx([h.score for h in local[0]])
    tau = local[0][0].score
    assert all(h.score > tau - 1e-9 for h in remote.search(["drummer of Toto"], 2, threshold=tau - 1e-9)[0])
    with pytest.raises(RetrievalError, match="422"):
        remote.search(["ok"], 50)


def test_remote_retriever_unreachable():
    r = RemoteRetriever("http://127.0.0.1:9", timeout=2, max_retries=2, backoff_initial=0.01)
    with pytest.raises(RetrievalError) as e:
        r.search(["q"], 1)
    assert e.value.is_retryable and r.attempts == 3 and "gave up after 3 attempts" in str(e.value)


def test_resolve_retriever(kb):
    assert isinstance(resolve_retriever("http://localhost:8000"), RemoteRetriever)
    assert len(resolve_retriever(str(kb.directory))) == 4  # type: ignore[arg-type]


def test_2000_requests_16_concurrent_clients_no_errors(kb):
    app = create_app(kb)
    statuses: list[int] = []

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://kb") as ac:
            async def worker(w: int) -> None:
                for i in range(125):
                    r = await ac.post("/retrieve", json={"queries": [f"query {w} {i} Toto"], "topk": 2,
                                                         "return_scores": True})
                    statuses.append(r.status_code if len(r.json()["result"][0]) == 2 else -1)
            await asyncio.gather(*(worker(w) for w in range(16)))

    asyncio.run(main())
    assert len(statuses) == 2000 and set(statuses) == {200}
