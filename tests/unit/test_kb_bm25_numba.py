"""The numba BM25 backend (bm25s's compiled retrieval loop on our index) against our numpy path:
the same scores at every rank, the same passages wherever a score is not tied at the cut-off,
batched and one query at a time; and the switch that picks the backend."""

import itertools
import sys

import bm25s
import numpy as np
import pytest
import Stemmer

from agentrag.errors import UserError
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.config import BM25Config
from agentrag.kb.indexes import BM25Index, resolve_bm25_backend
from agentrag.kb.ingest import questions, read_corpus
from agentrag.testing import HashEmbedder


@pytest.fixture(scope="module")
def pair(data_dir):
    texts = [p.contents for p in itertools.islice(read_corpus(data_dir / "corpora" / "2wiki_passages_6119.jsonl"), 600)]
    texts += texts[:50]  # exact duplicates: tied scores
    qs = [q for _, q, _ in itertools.islice(questions(data_dir / "2wikimultihopqa" / "dev_with_context_164.jsonl"), 80)]
    np_idx, nb_idx = BM25Index(backend="numpy"), BM25Index(backend="numba")
    np_idx.index(texts)
    nb_idx.index(texts)
    return np_idx, nb_idx, qs + ["", "the of and", "zzzqqq unknownword"]


def _full_row(idx: BM25Index, q: str) -> np.ndarray:
    ids = [t for t in next(iter(idx.tokenizer.streaming_tokenize([q], update_vocab=False)))
           if t < len(idx.retriever.scores["indptr"]) - 1]
    return idx.retriever.get_scores(ids) if ids else np.zeros(idx.size, dtype=np.float32)


def _same_ranking(np_idx: BM25Index, q: str, want: list, got: list) -> int:
    """Scores equal at every rank; passages equal above the cut-off score; at the cut-off score,
    numba's passages all have that score. Returns how many ranks matched by passage."""
    assert [s for _, s in got] == [s for _, s in want]
    if not want:
        return 0
    cut = want[-1][1]
    above_w, above_g = [(d, s) for d, s in want if s > cut], [(d, s) for d, s in got if s > cut]
    # within a tied score above the cut the order may differ, not the set
    assert sorted(above_g, key=lambda x: (-x[1], x[0])) == sorted(above_w, key=lambda x: (-x[1], x[0]))
    row = _full_row(np_idx, q)
    assert all(row[d] == s for d, s in got)
    return sum(a == b for a, b in zip(want, got))


@pytest.mark.parametrize("k", [1, 10, 700])
def test_numba_equals_numpy_batched_and_single(pair, k):
    np_idx, nb_idx, qs = pair
    want = np_idx.search(qs, k)
    got_batched = nb_idx.search(qs, k)
    got_single = [nb_idx.search([q], k)[0] for q in qs]
    assert got_batched == got_single
    matched = sum(_same_ranking(np_idx, q, w, g) for q, w, g in zip(qs, want, got_batched))
    assert matched >= 0.5 * sum(len(w) for w in want)  # 50 duplicated passages and k up to 700: many ties
    assert nb_idx.search(["the of and"], k) == [[]] and nb_idx.search([""], k) == [[]]


def test_top10_ids_identical_without_ties(pair):
    np_idx, nb_idx, qs = pair
    compared = 0
    for q, w, g in zip(qs, np_idx.search(qs, 10), nb_idx.search(qs, 10)):
        row = _full_row(np_idx, q)
        for (dw, sw), (dg, _) in zip(w, g):
            if int((row == sw).sum()) == 1:  # no other passage of the corpus has this score
                assert dw == dg
                compared += 1
    assert compared > 500


def test_no_queries_and_unknown_only(pair):
    _, nb_idx, _ = pair
    assert nb_idx.search([], 10) == []
    assert nb_idx.search(["zzzqqq unknownword"], 10) == [[]]


def test_adopted_index_vocab_matched_by_string(pair, data_dir, tmp_path):
    """A plain bm25s index (FlashRAG's layout: no tokenizer vocab): tokens matched by string."""
    texts = [p.contents for p in itertools.islice(read_corpus(data_dir / "corpora" / "2wiki_passages_6119.jsonl"), 300)]
    stemmer = Stemmer.Stemmer("english")
    ref = bm25s.BM25()
    ref.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    ref.save(str(tmp_path / "src"))
    idx = BM25Index.adopt(tmp_path / "src", tmp_path / "dst")
    assert idx.vocab == "index"
    qs = pair[2][:30] + ["zzzqqq"]
    idx.backend = "numpy"
    want = idx.search(qs, 10)
    idx.backend = "numba"
    got = idx.search(qs, 10)
    for w, g in zip(want, got):
        assert [s for _, s in g] == pytest.approx([s for _, s in w], rel=1e-6)
    assert got[-1] == [] and sum(len(g) for g in got) > 200


def test_backend_switch(monkeypatch):
    monkeypatch.delenv("AGENTRAG_BM25_BACKEND", raising=False)
    assert resolve_bm25_backend() == "numba" and resolve_bm25_backend("auto") == "numba"
    assert resolve_bm25_backend("numpy") == "numpy"
    monkeypatch.setenv("AGENTRAG_BM25_BACKEND", "numpy")
    assert resolve_bm25_backend("auto") == "numpy" and BM25Index().backend == "numpy"
    assert resolve_bm25_backend("numba") == "numba"  # an explicit choice wins over the environment
    monkeypatch.setenv("AGENTRAG_BM25_BACKEND", "fast")
    with pytest.raises(UserError, match="unknown BM25 backend 'fast'"):
        resolve_bm25_backend()
    monkeypatch.delenv("AGENTRAG_BM25_BACKEND")
    monkeypatch.setitem(sys.modules, "numba", None)  # numba not installed
    assert resolve_bm25_backend("auto") == "numpy"
    with pytest.raises(UserError, match="needs numba"):
        resolve_bm25_backend("numba")


def test_kb_config_picks_the_backend(data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTRAG_BM25_BACKEND", raising=False)
    passages = list(itertools.islice(read_corpus(data_dir / "corpora" / "2wiki_passages_6119.jsonl"), 200))
    qs = ["Who directed the film?", "Where was the composer born?"]
    hits = {}
    for backend in ("numpy", "numba"):
        cfg = KBConfig(method="bm25", bm25=BM25Config(backend=backend))
        KnowledgeBase.build(passages, tmp_path / backend, cfg, embedder=HashEmbedder(8), progress=False)
        kb = KnowledgeBase.load(tmp_path / backend, embedder=HashEmbedder(8))
        assert kb.bm25.backend == backend
        hits[backend] = [[(h.id, h.score) for h in q] for q in kb.search(qs, 5, method="bm25")]
    assert hits["numpy"] == hits["numba"] and all(hits["numba"])
    KnowledgeBase.build(passages, tmp_path / "auto", KBConfig(method="bm25"), embedder=HashEmbedder(8), progress=False)
    assert KnowledgeBase.load(tmp_path / "auto", embedder=HashEmbedder(8)).bm25.backend == "numba"
    monkeypatch.setenv("AGENTRAG_BM25_BACKEND", "numpy")
    assert KnowledgeBase.load(tmp_path / "auto", embedder=HashEmbedder(8)).bm25.backend == "numpy"
