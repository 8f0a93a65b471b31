"""Small-KB search speed (issue 27): the in-memory passage rows, the fast query tokenizer and the
hit builder return exactly what the uncached / bm25s paths return; a KB above the cache bound is
not read into memory."""

import itertools

import pytest

from agentrag.errors import UserError
from agentrag.kb import KBConfig, KnowledgeBase, bm25_query
from agentrag.kb.base import apply_threshold
from agentrag.kb.hits import PassageRows, cache_bytes, make_hits
from agentrag.kb.indexes import BM25Index
from agentrag.kb.ingest import questions, read_corpus
from agentrag.kb.passages import PassageStore
from agentrag.records import Passage
from agentrag.testing import HashEmbedder

ODD_QUERIES = [
    "", "   ", "the of and", "a b c", "zzzqqq unknownword", "Who directed Toto's 1977 film?",
    "Café Müller naïve résumé", "Ölüdeniz beach", "snake_case and CamelCase words_2 x1",
    "tab\tnew\nline,comma;semi-colon", "RUNNING runs ran runner", "日本 東京 tokyo", "don't won't 's",
    "déjà vu déjà", "1990s 90 9", "__init__ __", "a", "İstanbul",
]


INFLECTED = ["championships composers citizens governing locations founders directing albums rivers",
             "Nationalities footballer's presidencies singers' countries' developing recordings"]


def _dump(hits):
    return [[h.model_dump() for h in hs] for hs in hits]


@pytest.fixture(scope="module")
def corpus(data_dir):
    ps = list(itertools.islice(read_corpus(data_dir / "corpora" / "musique_train_passages_1890.jsonl"), 300))
    ps = [p.model_copy(update={"metadata": {"n": i, "tags": ["x"]}}) if i % 3 == 0 else p for i, p in enumerate(ps)]
    qs = [q for _, q, _ in itertools.islice(questions(data_dir / "musique" / "train_100.jsonl"), 60)]
    return ps, qs + ODD_QUERIES


@pytest.fixture()
def kb(tmp_path, corpus):
    return KnowledgeBase.build(corpus[0], tmp_path / "kb", KBConfig(method="bm25"), progress=False)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_query_tokenizer_matches_bm25s(kb, corpus, backend):
    idx = BM25Index.load(kb.directory / "bm25", mmap=True, backend=backend)
    ncols = len(idx.retriever.scores["indptr"]) - 1
    texts = corpus[1] + [p.contents for p in corpus[0][:80]] + INFLECTED
    qt = bm25_query.QueryTokenizer(idx.tokenizer, ncols)
    assert qt.fast
    got = qt(texts)  # before bm25s's own tokenizer adds the query words it stems to its word -> id map
    stemmed = [w for w in qt.memo if isinstance(w, bytes) and w.decode() not in idx.tokenizer.word_to_id
               and qt.memo[w] >= 0]
    assert len(stemmed) >= 5  # words found only through their stem were covered
    want = [[t for t in ids if t < ncols] for ids in idx.tokenizer.streaming_tokenize(texts, update_vocab=False)]
    assert got == want
    assert qt(texts) == want  # again, from the memo
    assert any(not t.isascii() for t in texts) and qt(["", "the of"]) == [want[texts.index("")]] * 2
    raw = idx.tokenizer.tokenize(corpus[1], update_vocab=False, return_as="ids", show_progress=False)
    docs, scores = idx.retriever.retrieve(raw, k=10, show_progress=False, n_threads=0)
    got = idx.search(corpus[1], 10)
    assert [[s for _, s in rs] for rs in got] == [[s for s in sr if s > 0] for sr in scores.tolist()]


def test_query_tokenizer_memo_is_bounded(kb, corpus, monkeypatch):
    monkeypatch.setattr(bm25_query, "MEMO_WORDS", 10)
    qt = bm25_query.QueryTokenizer(kb.bm25.tokenizer, len(kb.bm25.retriever.scores["indptr"]) - 1)
    first = qt(corpus[1])
    assert len(qt.memo) > 10
    assert qt(corpus[1][:1]) == first[:1] and len(qt.memo) <= 30  # cleared, then refilled by one query


def test_query_tokenizer_other_splitter_falls_back_to_bm25s(kb):
    import bm25s

    tok = bm25s.tokenization.Tokenizer(splitter=r"\w+", stopwords=[])
    tok.tokenize(["a bc de", "bc"], show_progress=False)
    qt = bm25_query.QueryTokenizer(tok, 10)
    assert not qt.fast
    assert qt(["bc a zz"]) == [[t for t in next(iter(tok.streaming_tokenize(["bc a zz"], update_vocab=False)))]]


def test_cached_rows_give_the_uncached_hits(kb, corpus, monkeypatch):
    qs = corpus[1]
    cached = kb.search(qs, 10)
    cached[0]  # the rows are read (and the hits built) when the result is first looked at
    assert kb._rows is not None and kb._rows.table is not None and len(kb._rows.table) == len(kb)
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", "0")
    kb._rows = None
    uncached = kb.search(qs, 10)
    uncached[0]
    assert kb._rows.table is None
    assert _dump(cached) == _dump(uncached)
    assert any(h.metadata for hs in cached for h in hs)
    # the hits are fresh objects: changing one changes no other search's
    cached[0][0].metadata["new"] = 1
    assert "new" not in kb.search(qs[:1], 10)[0][0].metadata


def test_hits_carry_the_stored_passages(kb, corpus):
    by_id = {p.id: p for p in corpus[0]}
    hits = kb.search(corpus[1], 5)
    assert sum(map(len, hits)) > 200
    for hs in hits:
        assert [h.score for h in hs] == sorted((h.score for h in hs), reverse=True)
        for h in hs:
            p = by_id[h.id]
            assert (h.title, h.text, h.metadata, h.method, h.kb) == (p.title, p.text, p.metadata, "bm25", "main")


def test_kb_above_the_bound_is_not_loaded(kb, corpus, monkeypatch):
    size_mb = kb.store.path.stat().st_size / (1 << 20)
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", str(size_mb * 0.99))

    def every_row(self):
        raise AssertionError("a store above the bound was read whole")

    monkeypatch.setattr(PassageStore, "all_raw_rows", every_row)
    small = KnowledgeBase.load(kb.directory)
    hits = small.search(corpus[1], 10)
    assert len(hits[0]) == 10 and small._rows.table is None
    monkeypatch.undo()
    assert _dump(hits) == _dump(kb.search(corpus[1], 10))


def test_kb_at_the_bound_is_loaded_once(kb, corpus, monkeypatch):
    size_mb = kb.store.path.stat().st_size / (1 << 20)
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", str(size_mb))
    calls = []
    real = PassageStore.all_raw_rows
    monkeypatch.setattr(PassageStore, "all_raw_rows", lambda self: calls.append(1) or real(self))
    monkeypatch.setattr(PassageStore, "raw_rows", lambda self, rows: pytest.fail("read per search"))
    other = KnowledgeBase.load(kb.directory)
    for q in corpus[1][:20]:
        assert other.search([q], 10)[0]
    assert calls == [1]


def test_cache_bound_setting(monkeypatch):
    monkeypatch.delenv("AGENTRAG_PASSAGE_CACHE_MB", raising=False)
    assert cache_bytes() == 32 << 20
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", "0.5")
    assert cache_bytes() == 1 << 19
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", "lots")
    with pytest.raises(UserError, match="AGENTRAG_PASSAGE_CACHE_MB"):
        cache_bytes()


def test_added_passages_are_found_after_a_cached_search(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", KBConfig(name="side"), embedder=HashEmbedder(32))
    kb.add([Passage(id="a", title="Paris", text="Paris is the capital of France.")])
    assert [h.id for h in kb.search(["capital of France"], 5, method="bm25")[0]] == ["a"]
    kb.add([Passage(id="b", title="Lyon", text="Lyon is a large city of France on the Rhone.")])
    assert [h.id for h in kb.search(["Lyon Rhone France"], 5, method="bm25")[0]][0] == "b"


def test_damaged_kb_is_a_user_error(kb):
    rows = PassageRows(kb.store, max_bytes=1 << 30)
    table = rows.lookup([0])
    with pytest.raises(UserError, match="damaged"):
        make_hits([[(len(kb) + 5, 1.0)]], table, "bm25", "main")
    with pytest.raises(UserError, match="damaged"):
        make_hits([[(len(kb) + 5, 1.0)]], {0: table[0]}, "bm25", "main")


def test_threshold_and_order_as_apply_threshold(tmp_path, corpus):
    kb = KnowledgeBase.build(corpus[0][:120], tmp_path / "kbh", KBConfig(name="h"), embedder=HashEmbedder(32),
                             progress=False)
    qs = corpus[1][:30]
    for method in ("bm25", "dense", "hybrid"):
        for rs in kb.rank(qs, 7, method):
            assert len(rs) <= 7 and [s for _, s in rs] == sorted((s for _, s in rs), reverse=True), method
        plain = kb.search(qs, 7, method=method)
        assert _dump(plain) == _dump([apply_threshold(h, 7, None) for h in plain])
        cut = sorted(h.score for hs in plain for h in hs)[len(qs) * 3]
        kept = kb.search(qs, 7, threshold=cut, method=method)
        assert _dump(kept) == _dump([[h for h in hs if h.score > cut] for hs in plain])
        assert 0 < sum(map(len, kept)) < sum(map(len, plain))


def test_hit_building_restores_the_garbage_collector(kb):
    import gc

    table = PassageRows(kb.store, max_bytes=1 << 30).lookup([0])
    assert gc.isenabled()
    assert make_hits([[(0, 1.0)]], table, "bm25", "main")[0][0].id == table[0][0]
    assert gc.isenabled()
    with pytest.raises(UserError):
        make_hits([[(0, 1.0), (len(kb) + 1, 0.5)]], table, "bm25", "main")
    assert gc.isenabled()
    gc.disable()
    try:
        make_hits([[(0, 1.0)]], table, "bm25", "main")
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()
