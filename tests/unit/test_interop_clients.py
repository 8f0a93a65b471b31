"""Each RL client's exact request against ``POST /retrieve``, and the text that client extracts
from our answer (issue 25, item 1). The extractors below restate, in our own code, which fields
each client reads (see docs/kb.md, "Clients"); a client that reads a field we do not send gets
empty text or "no results", which these tests catch."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.server import create_app
from agentrag.records import Passage
from agentrag.testing import HashEmbedder

DOCS = [("Paris", "Paris is the capital of France."), ("Toto", "Toto is an American rock band."),
        ("Jeff Porcaro", "Jeff Porcaro was the drummer of Toto."), ("Everest", "Everest is a mountain.")]
PORCARO = "Jeff Porcaro\nJeff Porcaro was the drummer of Toto."


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    ps = [Passage(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    kb = KnowledgeBase.build(ps, tmp_path_factory.mktemp("interop") / "kb", KBConfig(name="wiki", method="bm25"),
                             embedder=HashEmbedder(16), progress=False)
    return TestClient(create_app(kb, max_topk=10))


def _post(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/retrieve", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _search_r1_style(reply: dict[str, Any]) -> list[list[str]]:
    # Search-R1 _batch_search / verl perform_single_search_batch / skyrl-agent: result[q][i].document.contents
    return [[item["document"]["contents"] for item in per_q] for per_q in reply.get("result", [])]


@pytest.mark.parametrize("client_name", ["search-r1", "verl", "skyrl-agent"])
def test_batch_clients_read_result_documents(client, client_name):
    reply = _post(client, {"queries": ["Toto drummer", "capital of France"], "topk": 2, "return_scores": True})
    texts = _search_r1_style(reply)
    assert len(texts) == 2 and texts[0][0] == PORCARO and texts[1][0].startswith("Paris\n")
    assert all(isinstance(item["score"], float) for per_q in reply["result"] for item in per_q)


def test_skyrl_gym_single_query_reads_result(client):
    reply = _post(client, {"query": "Toto drummer", "topk": 3, "return_scores": True})
    raw = reply.get("result", [])
    assert raw, "skyrl-gym would answer 'No search results found.'"
    texts = _search_r1_style(reply)
    assert len(texts) == 1 and 1 <= len(texts[0]) <= 3 and texts[0][0] == PORCARO


def test_rllm_deepresearch_reads_content_and_id(client):
    reply = _post(client, {"query": "Toto drummer", "top_k": 2})
    got = [(h.get("id"), h.get("content", "")) for h in reply.get("results", [])]
    assert got[0] == ("d2", PORCARO) and all(body for _, body in got)


def test_rllm_examples_search_reads_document_contents(client):
    reply = _post(client, {"query": "Toto drummer", "top_k": 2})
    got = [(h.get("document", {}).get("id"), h.get("document", {}).get("contents", ""), h.get("score", 0.0))
           for h in reply.get("results", [])]
    assert got[0][:2] == ("d2", PORCARO) and all(body for _, body, _ in got)
    assert got[0][2] >= got[1][2] > 0.0


def test_agentic_rag_tracer_reads_doc_id_and_contents(client):
    reply = _post(client, {"query": "Toto drummer", "topk": 2})
    got = [(h["doc_id"], h["contents"]) for h in reply["results"]]
    assert got[0] == ("d2", PORCARO) and len(got) == 2


def test_single_query_result_and_results_agree(client):
    reply = _post(client, {"query": "capital of France", "topk": 2})
    assert reply["result"] == [reply["results"]]
    for h in reply["results"]:
        assert h["id"] == h["doc_id"] == h["document"]["id"]
        assert h["content"] == h["contents"] == h["document"]["contents"]


def test_batch_without_scores_keeps_the_plain_document_shape(client):
    reply = _post(client, {"queries": ["Toto drummer"], "topk": 1, "return_scores": False})
    assert reply == {"result": [[{"id": "d2", "contents": PORCARO}]]}
