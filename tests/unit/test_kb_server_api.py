"""The retrieval server's request shapes, limits, auth and concurrency (issue 11, item 5)."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.server import bearer_ok, create_app, tcp_listener
from agentrag.records import Hit, Passage
from agentrag.testing import HashEmbedder

DOCS = [("Paris", "Paris is the capital of France."), ("Toto", "Toto is an American rock band."),
        ("Jeff Porcaro", "Jeff Porcaro was the drummer of Toto."), ("Everest", "Everest is a mountain.")]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    ps = [Passage(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    return KnowledgeBase.build(ps, tmp_path_factory.mktemp("api") / "kb", KBConfig(name="wiki", method="bm25"),
                               embedder=HashEmbedder(16), progress=False)


@pytest.fixture(scope="module")
def client(kb):
    return TestClient(create_app(kb, max_topk=10, max_work=6))


def test_top_k_is_an_alias_of_topk(client):
    body = {"queries": ["Toto band", "capital of France"], "return_scores": True}
    a = client.post("/retrieve", json={**body, "topk": 1})
    b = client.post("/retrieve", json={**body, "top_k": 1})
    assert a.status_code == b.status_code == 200
    assert a.json() == b.json()
    assert [len(r) for r in b.json()["result"]] == [1, 1]
    assert b.json()["result"][0][0]["document"]["id"] == "d1"


def test_topk_and_top_k_disagreeing_is_422_naming_both(client):
    r = client.post("/retrieve", json={"queries": ["Toto"], "topk": 1, "top_k": 2})
    assert r.status_code == 422 and "topk (1) and top_k (2)" in r.json()["detail"]
    assert client.post("/retrieve", json={"queries": ["Toto"], "topk": 2, "top_k": 2}).status_code == 200


def test_single_query_gets_the_tracer_results_shape(client):
    r = client.post("/retrieve", json={"query": "Toto drummer", "topk": 2})  # AgenticRAGTracer
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 2 and all(set(d) >= {"doc_id", "contents", "score"} for d in results)
    assert results[0]["doc_id"] == "d2" and results[0]["contents"] == "Jeff Porcaro\nJeff Porcaro was the drummer of Toto."
    assert isinstance(results[0]["score"], float) and results[0]["score"] >= results[1]["score"]
    assert "x-ignored-fields" not in r.headers


def test_single_query_with_top_k_and_extra_fields(client):
    # rllm's local retrieval tool: {"query", "top_k"} plus fields the server does not use
    r = client.post("/retrieve", json={"query": "Toto band", "top_k": 1, "description": "", "args": [], "kwargs": {}})
    assert r.status_code == 200
    assert [d["doc_id"] for d in r.json()["results"]] == ["d1"]
    assert r.headers["x-ignored-fields"] == "args,description,kwargs"


def test_single_query_matches_the_batch_answer(client):
    single = client.post("/retrieve", json={"query": "capital of France", "topk": 3}).json()["results"]
    batch = client.post("/retrieve", json={"queries": ["capital of France"], "topk": 3,
                                           "return_scores": True}).json()["result"][0]
    assert [(d["doc_id"], d["contents"], d["score"]) for d in single] == \
        [(d["document"]["id"], d["document"]["contents"], d["score"]) for d in batch]


@pytest.mark.parametrize("body, status, words", [
    ({"query": "a", "queries": ["b"]}, 422, "not both"),
    ({"query": ["a"]}, 422, "query must be a string"),
    ({"query": "  "}, 422, "query is empty"),
    ({"queries": ["a"], "top_k": True}, 422, "top_k must be an integer"),
    ({"queries": ["a"], "return_scores": "yes"}, 422, "return_scores"),
    ({"topk": 2}, 422, "\"query\""),
    ([1, 2], 422, "JSON object"),
])
def test_bad_fields_are_named(client, body, status, words):
    r = client.post("/retrieve", json=body)
    assert r.status_code == status and words in r.json()["detail"], r.text


def test_work_bound_413_says_how_to_split(client):
    assert client.post("/retrieve", json={"queries": ["a", "b", "c"], "topk": 2}).status_code == 200  # 6 hits
    r = client.post("/retrieve", json={"queries": ["a", "b", "c"], "topk": 3})  # 9 hits > max_work 6
    assert r.status_code == 413
    detail = r.json()["detail"]
    assert "3 queries x topk 3 = 9 hits" in detail and "--max-work" in detail and "at most 2 queries" in detail
    assert client.post("/retrieve", json={"query": "a", "topk": 7}).status_code == 413


def test_oversized_body_is_413_before_parsing(kb):
    c = TestClient(create_app(kb, max_queries=2, max_query_chars=10))
    r = c.post("/retrieve", content=b"[" + b" " * 100_000 + b"]", headers={"content-type": "application/json"})
    assert r.status_code == 413 and "split" in r.json()["detail"]


def test_auth_is_checked_before_the_body(kb):
    c = TestClient(create_app(kb, token="s3cret"))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"},
                    {"Authorization": "s3cret"}):
        for content in (b"not json", b'{"topk": 0}'):
            r = c.post("/retrieve", content=content, headers={"content-type": "application/json", **headers})
            assert r.status_code == 401, (headers, content, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
    ok = {"Authorization": "Bearer s3cret"}
    assert c.post("/retrieve", content=b"not json", headers=ok).status_code == 400
    assert c.post("/retrieve", json={"topk": 0, "queries": ["a"]}, headers=ok).status_code == 422


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "BeArEr"])
def test_bearer_scheme_is_case_insensitive(kb, scheme):
    c = TestClient(create_app(kb, token="s3cret"))
    r = c.post("/retrieve", json={"query": "Toto"}, headers={"Authorization": f"{scheme} s3cret"})
    assert r.status_code == 200


def test_bearer_ok():
    assert bearer_ok("Bearer tok", "tok") and bearer_ok("bearer  tok ", "tok")
    assert not bearer_ok(None, "tok") and not bearer_ok("Bearer tok2", "tok") and not bearer_ok("Bearer", "tok")
    assert not bearer_ok("Token tok", "tok")


def test_openapi_docs_off_unless_asked(kb):
    off = TestClient(create_app(kb))
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert off.get(path).status_code == 404
    on = TestClient(create_app(kb, docs=True))
    assert on.get("/docs").status_code == 200 and on.get("/openapi.json").status_code == 200


def test_get_retrieve_is_405(client):
    assert client.get("/retrieve").status_code == 405


def test_pool_and_chunks_give_the_same_bytes_as_inline(kb):
    """A batch split into chunks in the thread pool answers byte for byte what the inline path does."""
    body = {"queries": ["Toto", "France capital", "mountain", "drummer"], "topk": 2, "return_scores": True}
    inline = TestClient(create_app(kb)).post("/retrieve", json=body)
    chunked = TestClient(create_app(kb, inline_work=0, chunk_work=2)).post("/retrieve", json=body)
    assert inline.content == chunked.content
    local = kb.search(body["queries"], 2)
    assert [[d["document"]["id"] for d in r] for r in chunked.json()["result"]] == [[h.id for h in r] for r in local]


class SlowRetriever:
    """A fake whose search holds the GIL for ``per_hit`` seconds per hit asked (a CPU-bound index)."""

    def __init__(self, per_hit: float) -> None:
        self.per_hit = per_hit

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        out = []
        for q in queries:
            end = time.perf_counter() + self.per_hit * k
            while time.perf_counter() < end:
                pass
            out.append([Hit(id=f"{q}-{i}", title=q, text="t", score=1.0 / (i + 1), method="fake", kb="f")
                        for i in range(k)])
        return out


def test_a_large_request_does_not_delay_a_small_one():
    """Bound (loose, the machine may be shared): while a max-size request (512 queries x topk 8,
    about 1 s of GIL-holding search) runs, a small one started 0.1 s later finishes first and
    within half the large one's time; benchmarks/retrieval.py measures it on a real KB."""
    app = create_app(SlowRetriever(per_hit=0.00025), max_topk=100, max_work=4096)
    big = {"queries": [f"q{i}" for i in range(512)], "topk": 8}
    small = {"queries": ["x"], "topk": 3}
    done: dict[str, float] = {}

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://kb", timeout=60) as ac:
            async def post(name: str, body: dict, delay: float) -> None:
                await asyncio.sleep(delay)
                t0 = time.perf_counter()
                r = await ac.post("/retrieve", json=body)
                assert r.status_code == 200
                done[name] = time.perf_counter() - t0
                done[name + "_end"] = time.perf_counter()
            await asyncio.gather(post("big", big, 0.0), post("small", small, 0.1))

    asyncio.run(main())
    assert done["big"] > 0.5  # the large request really was large
    assert done["small_end"] < done["big_end"]
    assert done["small"] < 0.5 * done["big"], done


def test_tcp_listener_turns_nagle_off():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sock = tcp_listener("127.0.0.1", port)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


@pytest.mark.parametrize("method, words", [("bm26", "--method 'bm26': choose one of bm25, dense, hybrid"),
                                           ("dense", "no dense index")])
def test_bad_method_fails_at_startup(kb, monkeypatch, method, words):
    """`kb serve --method bm26` (or a method the KB cannot serve) exits 2 before any server starts."""
    from typer.testing import CliRunner

    import agentrag.kb.server as server
    from agentrag.cli.main import app

    started: list[tuple] = []
    monkeypatch.setattr(server, "serve", lambda *a, **k: started.append(("serve", k["max_work"], k["docs"])))
    monkeypatch.setattr(server, "serve_workers", lambda *a, **k: started.append(("serve_workers",)))
    for workers in ("1", "2"):
        res = CliRunner().invoke(app, ["kb", "serve", str(kb.directory), "--method", method, "--workers", workers])
        assert res.exit_code == 2, res.output
        assert words in " ".join(res.output.split())
    assert started == []
    res = CliRunner().invoke(app, ["kb", "serve", str(kb.directory), "--method", "bm25", "--max-work", "64", "--docs"])
    assert res.exit_code == 0, res.output
    assert started == [("serve", 64, True)]


def test_concurrent_small_requests_batched_get_their_own_answers(kb):
    """Small BM25 requests arriving together are searched as one batch; each still gets exactly
    the answer it would get alone (its own topk and shape)."""
    class Counting:
        config = kb.config

        def __init__(self) -> None:
            self.calls = 0

        def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
            self.calls += 1
            return kb.search(queries, k, threshold)

    counting = Counting()
    app = create_app(counting)
    queries = ["Toto band", "capital of France", "drummer", "Everest mountain", "Paris", "rock"]
    bodies = [({"query": q, "topk": 1 + i % 3} if i % 2 else
               {"queries": [q, queries[(i + 1) % len(queries)]], "top_k": 1 + i % 3, "return_scores": bool(i % 4)})
              for i, q in enumerate(queries * 4)]

    async def main() -> list[bytes]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kb") as ac:
            together = await asyncio.gather(*(ac.post("/retrieve", json=b) for b in bodies))
            assert counting.calls < len(bodies)  # batched
            alone = [await ac.post("/retrieve", json=b) for b in bodies]
        assert all(r.status_code == 200 for r in together + alone)
        return [r.content for r in together] + [r.content for r in alone]

    got = asyncio.run(main())
    assert got[: len(bodies)] == got[len(bodies):]
    searcher_hits = kb.search(["Toto band"], 1)[0]
    assert TestClient(app).post("/retrieve", json={"query": "Toto band", "topk": 1}).json()["results"][0]["doc_id"] \
        == searcher_hits[0].id


def test_search_r1_answers_unchanged_on_shared_data(data_dir, tmp_path):
    """On the shared HotpotQA paragraphs the server answers exactly what the Search-R1 format of
    kb.search is (the pre-change handler's mapping), for BM25 (batched on the loop, and in pool
    chunks) and hybrid (pool), with and without scores."""
    from agentrag.kb.ingest import pooled_passages, questions

    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = tmp_path / "sub.jsonl"
    with src.open(encoding="utf-8") as f:
        sub.write_text("".join(line for _, line in zip(range(20), f, strict=False)), encoding="utf-8")
    kb = KnowledgeBase.build(list(pooled_passages([sub])), tmp_path / "kb", KBConfig(), embedder=HashEmbedder(32),
                             progress=False)
    qs = [q for _, q, _ in questions(sub)]
    for method in ("bm25", "hybrid"):
        for scores in (True, False):
            expected = [[{"document": {"id": h.id, "contents": h.contents}, "score": h.score} if scores else
                         {"id": h.id, "contents": h.contents} for h in per_q]
                        for per_q in kb.search(qs, 5, method=method)]
            for app in (create_app(kb, method=method), create_app(kb, method=method, chunk_work=7)):
                c = TestClient(app)
                got = c.post("/retrieve", json={"queries": qs, "topk": 5, "return_scores": scores}).json()
                assert got == {"result": expected}
                one = c.post("/retrieve", json={"queries": qs[:1], "topk": 5, "return_scores": scores}).json()
                assert one == {"result": expected[:1]}


def test_constrained_navigation_default_method_is_checked_at_startup(kb, monkeypatch):
    """Constrained navigation searches dense unless --method says otherwise: on a BM25-only KB
    that fails at startup (exit 2), not on every request."""
    from typer.testing import CliRunner

    import agentrag.kb.serving as serving
    from agentrag.cli.main import app

    started: list[str] = []
    monkeypatch.setattr(serving, "serve_navigation", lambda *a, **k: started.append(k["method"]))
    args = ["kb", "serve", str(kb.directory), "--navigation", "constrained", "--distractors", str(kb.directory)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "no dense index" in " ".join(res.output.split()), res.output
    assert started == []
    assert CliRunner().invoke(app, [*args, "--method", "bm25"]).exit_code == 0 and started == ["bm25"]
