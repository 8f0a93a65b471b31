"""``KnowledgeBase.search`` ranks at once and builds its hits when they are first looked at: the
result is, in every way a caller can see, the list of hit lists the eager search returned."""

import copy
import itertools
import pickle
import threading

import pytest

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb import hits as hits_module
from agentrag.kb.base import apply_threshold
from agentrag.kb.hits import SearchResults, make_hits
from agentrag.kb.ingest import questions, read_corpus
from agentrag.kb.passages import PassageStore
from agentrag.records import Hit
from agentrag.testing import HashEmbedder


@pytest.fixture(scope="module")
def corpus(data_dir):
    ps = list(itertools.islice(read_corpus(data_dir / "corpora" / "musique_train_passages_1890.jsonl"), 240))
    qs = [q for _, q, _ in itertools.islice(questions(data_dir / "musique" / "train_100.jsonl"), 40)]
    return ps, qs + ["", "zzzqqq unknownword", "the of and"]


@pytest.fixture(scope="module")
def kb(tmp_path_factory, corpus):
    return KnowledgeBase.build(corpus[0], tmp_path_factory.mktemp("kb") / "kb", KBConfig(name="lz"),
                               embedder=HashEmbedder(32), progress=False)


def _eager(kb, qs, k, method, threshold=None):
    """What search returned before it was lazy: rank, read the rows, build every hit."""
    ranked = kb.rank(qs, k, method)
    table = kb.store.raw_rows(r for rs in ranked for r, _ in rs)
    return [apply_threshold(h, k, threshold) for h in make_hits(ranked, table, method, kb.name)]


def _dump(results):
    return [[(type(h), h.model_dump()) for h in hs] for hs in results]


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
def test_results_equal_the_eager_hits(kb, corpus, method, backend, monkeypatch):
    monkeypatch.setattr(kb.bm25, "backend", backend)
    qs = corpus[1]
    for k, threshold in ((10, None), (3, None), (7, 2.5 if method == "bm25" else 0.01)):
        lazy = kb.search(qs, k, threshold=threshold, method=method)
        eager = _eager(kb, qs, k, method, threshold)
        assert len(lazy) == len(qs)
        assert _dump(lazy) == _dump(eager)
        assert lazy == eager and eager == lazy and not (lazy != eager)
        assert all(type(hs) is list for hs in lazy)
    assert sum(map(len, kb.search(qs, 10, method=method))) > 300


def test_nothing_is_read_until_looked_at(kb, corpus, monkeypatch):
    qs = corpus[1]
    expected = _dump(kb.search(qs, 10))
    built = []
    real = hits_module.make_hits
    monkeypatch.setattr(hits_module, "make_hits", lambda *a: built.append(1) or real(*a))
    monkeypatch.setattr(PassageStore, "raw_rows", lambda self, rows: pytest.fail("passages read by search"))
    kb._rows = None
    monkeypatch.setenv("AGENTRAG_PASSAGE_CACHE_MB", "0")  # a large KB: rows read from SQLite per search
    res = kb.search(qs, 10)
    assert len(res) == len(qs) and bool(res)
    assert built == []
    monkeypatch.undo()
    monkeypatch.setattr(hits_module, "make_hits", lambda *a: built.append(1) or real(*a))
    first = res[3]
    assert built == [1]  # every query's hits built at once (one read of the rows), then kept
    assert res[3] is first and list(res)[3] is first and res[-1] is res[len(qs) - 1]
    assert _dump(res) == expected and built == [1]


def test_behaves_as_a_list(kb, corpus):
    qs = corpus[1][:6]
    res = kb.search(qs, 4)
    plain = list(res)
    assert isinstance(res, SearchResults)
    assert res[1:3] == plain[1:3] and res[::-1] == plain[::-1]
    assert list(reversed(res)) == plain[::-1]
    assert plain[2] in res and res.index(plain[2]) == 2 and res.count(plain[0]) == 1
    assert res + [[]] == plain + [[]] and [[]] + res == [[]] + plain
    assert repr(res) == repr(plain)
    assert res != plain[:-1] and res != "text" and res != 3
    with pytest.raises(IndexError):
        res[len(qs)]
    with pytest.raises(TypeError):
        hash(res)
    for other in (pickle.loads(pickle.dumps(res)), copy.copy(res), copy.deepcopy(res)):
        assert type(other) is list and other == plain
    assert type(copy.copy(res)[0][0]) is Hit


def test_one_build_under_threads(kb, corpus, monkeypatch):
    res = kb.search(corpus[1], 10)
    built = []
    real = hits_module.make_hits
    monkeypatch.setattr(hits_module, "make_hits", lambda *a: built.append(1) or real(*a))
    seen = []
    start = threading.Barrier(8)

    def look():
        start.wait()
        seen.append(res[0])

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == [1] and all(s is seen[0] for s in seen)


def test_empty_and_zero_k(kb):
    assert kb.search([], 5) == [] and len(kb.search([], 5)) == 0 and not kb.search([], 5)
    assert kb.search(["capital", "river"], 0) == [[], []]
