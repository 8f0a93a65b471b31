"""A KB over a small real subset (HotpotQA dev contexts) with the real embedded embedder."""

import socket
import threading
import time

import numpy as np
import pytest

from agentrag.kb import KBConfig, KnowledgeBase, RemoteRetriever
from agentrag.kb.ingest import gold_passages, pooled_passages
from agentrag.kb.recall import eval_recall

pytestmark = [pytest.mark.slow, pytest.mark.integration]
N_QUESTIONS = 8


@pytest.fixture(scope="module")
def subset(data_dir, tmp_path_factory):
    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = tmp_path_factory.mktemp("kbreal") / "hotpot_sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(N_QUESTIONS)), encoding="utf-8")
    return sub


@pytest.fixture(scope="module")
def real_kb(subset, tmp_path_factory):
    out = tmp_path_factory.mktemp("kbreal_out") / "kb"
    return KnowledgeBase.build(pooled_passages([subset]), out, KBConfig(), gold=gold_passages(subset),
                               progress=False)


def test_real_kb_recall_and_reload(real_kb, subset):
    assert 60 <= len(real_kb) <= 10 * N_QUESTIONS
    table = eval_recall(real_kb, subset)
    assert table["questions"] == N_QUESTIONS and table["missing_gold"] == 0
    for method in ("bm25", "dense", "hybrid"):
        assert table["methods"][method][10]["passage"] >= 0.6, (method, table)
    again = KnowledgeBase.load(real_kb.directory)
    q = ["Which band did Jeff Porcaro play drums for?"]
    assert again.search(q, 1, method="dense")[0][0].title == real_kb.search(q, 1, method="dense")[0][0].title
    assert again.params["embedder"]["backend"] == "torch" and again.params["embedder"]["dim"] == 384


def test_onnx_int8_close_to_fp32(real_kb):
    from agentrag.kb.embedders import load_embedder

    texts = [p.contents for p in list(real_kb.passages())[:16]]
    fp32 = load_embedder(backend="torch").embed(texts, kind="passage")
    int8 = real_kb.embedder.embed(texts, kind="passage")
    assert float((fp32 * int8).sum(1).mean()) > 0.93
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-4)


def test_real_uvicorn_server_on_loopback(real_kb):
    import uvicorn

    from agentrag.kb.server import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(real_kb), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        remote = RemoteRetriever(f"http://127.0.0.1:{port}")
        q = ["Which band did Jeff Porcaro play drums for?", "Who founded Toto?"]
        got = remote.search(q, 3)
        local = real_kb.search(q, 3)
        assert [[h.id for h in r] for r in got] == [[h.id for h in r] for r in local]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
