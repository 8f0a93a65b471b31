import json

import numpy as np
import pytest

from agentrag.errors import UserError
from agentrag.kb import KBConfig, KnowledgeBase, MultiRetriever
from agentrag.kb.indexes import BM25Index, DenseIndex, rrf_fuse
from agentrag.records import Passage
from agentrag.testing import FakeRetriever, HashEmbedder

DOCS = [
    ("Paris", "Paris is the capital and largest city of France."),
    ("Berlin", "Berlin is the capital of Germany and its largest city."),
    ("Toto", "Toto is an American rock band formed in 1977 in Los Angeles."),
    ("Jeff Porcaro", "Jeff Porcaro was an American drummer and a founding member of Toto."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Python", "Python is a programming language that emphasises readability."),
]


def _passages(docs=DOCS, prefix="d"):
    return [Passage(id=f"{prefix}{i}", title=t, text=x) for i, (t, x) in enumerate(docs)]


@pytest.fixture()
def kb(tmp_path):
    return KnowledgeBase.build(_passages(), tmp_path / "kb", KBConfig(name="main"), embedder=HashEmbedder(64),
                               progress=False)


def test_search_every_method_returns_complete_hits(kb):
    for method in ("bm25", "dense", "hybrid"):
        hits = kb.search(["Jeff Porcaro drummer", "Paris capital of France"], 3, method=method)
        assert len(hits) == 2
        assert hits[0][0].title == "Jeff Porcaro", method
        assert hits[1][0].title == "Paris", method
        for h in hits[0]:
            assert h.kb == "main" and h.method == method and h.id.startswith("d") and h.text
        scores = [h.score for h in hits[0]]
        assert scores == sorted(scores, reverse=True)


def test_threshold_eq4_strictly_above_then_top_k(kb):
    full = kb.search(["American drummer of Toto"], 6, method="dense")[0]
    tau = full[1].score
    kept = kb.search(["American drummer of Toto"], 6, threshold=tau, method="dense")[0]
    assert [h.id for h in kept] == [h.id for h in full if h.score > tau]
    assert len(kb.search(["American drummer of Toto"], 1, threshold=-1.0, method="dense")[0]) == 1
    assert kb.search(["American drummer of Toto"], 5, threshold=1.01, method="dense")[0] == []


def test_hybrid_is_weighted_rrf():
    runs = {"bm25": [[(1, 9.0), (2, 5.0)]], "dense": [[(2, 0.9), (3, 0.8)]]}
    fused = rrf_fuse(runs, {"bm25": 1.0, "dense": 1.0}, 60)[0]
    assert fused[0][0] == 2
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    only_bm25 = rrf_fuse(runs, {"bm25": 1.0, "dense": 0.0}, 60)[0]
    assert only_bm25[0][0] == 1
    # KB hybrid with dense weight 0 ranks exactly like BM25
    # (checked on a KB in test_hybrid_weights_change_ranking)


def test_hybrid_weights_change_ranking(tmp_path):
    cfg = KBConfig(hybrid={"weights": {"bm25": 1.0, "dense": 0.0}})
    kb = KnowledgeBase.build(_passages(), tmp_path / "kb", cfg, embedder=HashEmbedder(64), progress=False)
    q = ["capital city largest"]
    assert [h.id for h in kb.search(q, 3, method="hybrid")[0]] == [h.id for h in kb.search(q, 3, method="bm25")[0]]


def test_save_load_needs_no_corpus_and_writes_plain_files(kb, tmp_path):
    d = tmp_path / "kb"
    names = {p.name for p in d.rglob("*") if p.is_file()}
    assert {"params.json", "passages.sqlite", "dense.faiss"} <= names
    assert not any(n.endswith((".pkl", ".pickle")) for n in names)
    assert not (tmp_path / "kb.partial").exists()
    params = json.loads((d / "params.json").read_text())
    assert params["counts"]["passages"] == 6 and params["index_type"] == "flat"
    assert "bm25s" in params["versions"] and params["embedder"]["dim"] == 64
    again = KnowledgeBase.load(d, embedder=HashEmbedder(64))
    for m in ("bm25", "dense", "hybrid"):
        a = kb.search(["rock band Los Angeles"], 4, method=m)[0]
        b = again.search(["rock band Los Angeles"], 4, method=m)[0]
        assert [(h.id, round(h.score, 5)) for h in a] == [(h.id, round(h.score, 5)) for h in b]
    assert again.get("d2").title == "Toto" and len(again) == 6
    assert sorted(p.id for p in again.passages()) == [f"d{i}" for i in range(6)]
    assert again.sample_titles(3, seed=1) == again.sample_titles(3, seed=1)
    assert len(set(again.sample_titles(3, seed=1))) == 3


def test_build_refuses_existing_and_empty(kb, tmp_path):
    with pytest.raises(UserError, match="already exists"):
        KnowledgeBase.build(_passages(), tmp_path / "kb", embedder=HashEmbedder(64), progress=False)
    with pytest.raises(UserError, match="no passages"):
        KnowledgeBase.build([], tmp_path / "e", embedder=HashEmbedder(64), progress=False)
    with pytest.raises(UserError, match="duplicate passage id"):
        KnowledgeBase.build(_passages() + _passages()[:1], tmp_path / "dup", embedder=HashEmbedder(64),
                            progress=False)
    with pytest.raises(UserError, match="not a knowledge base"):
        KnowledgeBase.load(tmp_path / "nothing")


def test_incremental_add_persists(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "distractors", KBConfig(name="distractor"), embedder=HashEmbedder(64))
    assert len(kb) == 0 and kb.search(["anything"], 3) == [[]]
    kb.add(_passages(DOCS[:3], prefix="x"))
    kb.add([Passage(id="x9", title="Quokka", text="The quokka is a small marsupial on Rottnest Island.")])
    for m in ("bm25", "dense", "hybrid"):
        top = kb.search(["quokka marsupial"], 2, method=m)[0][0]
        assert top.id == "x9" and top.kb == "distractor"
    with pytest.raises(UserError, match="duplicate"):
        kb.add([Passage(id="x9", title="Q", text="again")])
    again = KnowledgeBase.load(tmp_path / "distractors", embedder=HashEmbedder(64))
    assert len(again) == 4
    assert again.search(["quokka marsupial"], 1, method="hybrid")[0][0].id == "x9"
    with pytest.raises(UserError, match="already holds"):
        KnowledgeBase.create(tmp_path / "distractors", embedder=HashEmbedder(64))


def test_resumed_embeddings_match(tmp_path):
    from agentrag.kb.indexes import embed_to_memmap

    emb = HashEmbedder(16)
    texts = [f"text number {i} about topic {i % 7}" for i in range(50)]
    path = tmp_path / "e.npy"
    full = np.array(embed_to_memmap(emb, texts, path, chunk=8, progress=False, key="a"))

    class Failing(HashEmbedder):
        calls = 0
        name = "h"

        def embed(self, texts, kind="query"):
            Failing.calls += 1
            if Failing.calls == 3:
                raise KeyboardInterrupt
            return super().embed(texts, kind)

    path2 = tmp_path / "f.npy"
    with pytest.raises(KeyboardInterrupt):
        embed_to_memmap(Failing(16), texts, path2, chunk=8, progress=False, key="a")
    counted = []

    class Counting(HashEmbedder):
        name = "h"
        def embed(self, texts, kind="query"):
            counted.append(len(texts))
            return super().embed(texts, kind)

    resumed = np.array(embed_to_memmap(Counting(16), texts, path2, chunk=8, progress=False, key="a"))
    assert sum(counted) == 50 - 16
    np.testing.assert_allclose(resumed, full)


def test_index_types_hnsw_and_ivfpq(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    flat = DenseIndex(32, "flat")
    flat.add(x)
    for kind in ("hnsw", "ivfpq"):
        idx = DenseIndex(32, kind, nlist=8, nprobe=8)
        idx.add(x)
        got = idx.search_vectors(x[:20], 5)
        exact = flat.search_vectors(x[:20], 5)
        assert sum(g[0][0] == e[0][0] for g, e in zip(got, exact)) >= 15, kind
        idx.save(tmp_path / f"{kind}.faiss")
        back = DenseIndex(32, kind, nlist=8, nprobe=8)
        back.load_index(tmp_path / f"{kind}.faiss")
        assert back.search_vectors(x[:3], 2) == idx.search_vectors(x[:3], 2)
    with pytest.raises(UserError, match="ivfpq"):
        DenseIndex(32, "ivfpq").add(x[:50])
    with pytest.raises(UserError, match="unknown dense index type"):
        DenseIndex(32, "annoy")


def test_multiretriever_per_kb_k(kb):
    other = FakeRetriever(_passages(DOCS[2:4], prefix="z"), kb="ignored")
    multi = MultiRetriever({"main": kb, "distractor": other})
    hits = multi.search_split("American drummer Toto band", {"main": 3, "distractor": 2})
    assert sum(h.kb == "main" for h in hits) == 3
    assert sum(h.kb == "distractor" for h in hits) == 2
    assert {h.id for h in hits if h.kb == "distractor"} == {"z0", "z1"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    merged = multi.search(["American drummer Toto band"], 4)
    assert len(merged[0]) == 4
    with pytest.raises(UserError, match="unknown KB"):
        multi.search_split("q", {"nope": 1})


def test_bm25_defaults_stem_and_drop_stopwords():
    idx = BM25Index()
    idx.index(["The runners were running quickly", "A cat sleeps"])
    assert idx.search(["run"], 2)[0][0][0] == 0
    assert idx.search(["the of a"], 2) == [[]]


def test_load_with_search_time_overrides(kb, tmp_path):
    again = KnowledgeBase.load(tmp_path / "kb", embedder=HashEmbedder(64),
                               overrides=["method=bm25", "hybrid.rrf_k=5", "hybrid.weights.dense=0.25"])
    assert again.config.method == "bm25" and again.config.hybrid.rrf_k == 5
    assert again.config.hybrid.weights == {"bm25": KBConfig().hybrid.weights["bm25"], "dense": 0.25}
    assert again.search(["Paris capital"], 1)[0][0].method == "bm25"
    with pytest.raises(UserError, match="fixed when the KB is built"):
        KnowledgeBase.load(tmp_path / "kb", embedder=HashEmbedder(64), overrides=["index.type=hnsw"])
    with pytest.raises(UserError, match="hybrid.rrf_kk"):
        KnowledgeBase.load(tmp_path / "kb", embedder=HashEmbedder(64), overrides=["hybrid.rrf_kk=5"])
