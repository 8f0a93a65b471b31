"""Our BM25 hot path (block scoring, hits built without pydantic's per-field work) returns exactly
what bm25s's own ``retrieve`` returns on the same index object, ties included."""

import itertools

import pytest

from agentrag.kb import KBConfig, KnowledgeBase, indexes
from agentrag.kb.hits import make_hits
from agentrag.kb.indexes import BM25Index
from agentrag.kb.ingest import questions, read_corpus
from agentrag.records import Hit


def _raw(idx: BM25Index, qs: list[str], k: int) -> list[list[tuple[int, float]]]:
    ids = idx.tokenizer.tokenize(qs, update_vocab=False, return_as="ids", show_progress=False)
    docs, scores = idx.retriever.retrieve(ids, k=k, show_progress=False, n_threads=0)
    return [[(d, s) for d, s in zip(dr, sr) if s > 0] for dr, sr in zip(docs.tolist(), scores.tolist())]


@pytest.fixture(scope="module")
def real(data_dir):
    texts = [p.contents for p in itertools.islice(read_corpus(data_dir / "corpora" / "2wiki_passages_6119.jsonl"), 600)]
    texts += texts[:50]  # exact duplicates: tied scores the selection must order as bm25s does
    qs = [q for _, q, _ in itertools.islice(questions(data_dir / "2wikimultihopqa" / "dev_with_context_164.jsonl"), 80)]
    idx = BM25Index(backend="numpy")  # bm25s numpy parity; the numba backend: test_kb_bm25_numba.py
    idx.index(texts)
    return idx, qs + ["", "the of and", "zzzqqq unknownword"]


@pytest.mark.parametrize("k", [1, 10, 700])
def test_search_equals_bm25s_batched_and_single(real, k):
    idx, qs = real
    want = _raw(idx, qs, min(k, idx.size))
    assert idx.search(qs, k) == want
    assert [idx.search([q], k)[0] for q in qs] == want
    assert idx.search(["the of and"], k) == [[]]  # stopwords only: no hit, as bm25s's zero scores


def test_blocks_split_the_batch_without_changing_results(real, monkeypatch):
    idx, qs = real
    want = idx.search(qs, 10)
    monkeypatch.setattr(indexes, "SCORE_CELLS", idx.size * 3)  # 3 queries a block
    assert idx.search(qs, 10) == want


def test_tied_duplicates_come_back_in_bm25s_order(real):
    idx, _ = real
    q = ["Who is the director of the film"]
    got, want = idx.search(q, 50)[0], _raw(idx, q, 50)[0]
    assert got == want
    assert len({s for _, s in got}) < len(got)  # the check above did cover ties


def _hit(row, score, method, kb):
    return make_hits([[(0, score)]], [row], method, kb)[0][0]


def test_fast_hit_is_model_construct():
    meta = '{"url": "x"}'
    a = _hit(("p1", "T", "text", meta), 2.5, "bm25", "main")
    b = Hit.model_construct(id="p1", title="T", text="text", score=2.5, method="bm25", kb="main",
                            metadata={"url": "x"})
    assert a == b and a.model_dump() == b.model_dump() and a.model_dump_json() == b.model_dump_json()
    assert a.model_fields_set == set(Hit.model_fields)  # every field given (schema_version too)
    assert _hit(("p2", "", "t", None), 1, "bm25", "kb").metadata == {}
    a.score = 3.0  # a real, mutable model
    assert b.score == 2.5 and a.score == 3.0 and a.model_fields_set == set(Hit.model_fields)


def test_fast_hits_are_independent():
    """Hits of one build share their fields-set (all fields; pydantic only adds names already in
    it), nothing else: changing one hit, its metadata or a copy of it leaves the others as they were."""
    rows = [("p1", "T", "text", '{"url": "x"}'), ("p2", "", "t", None)]
    hits = make_hits([[(0, 2.0), (1, 1.0)], [(1, 3.0), (0, 0.5)]], rows, "bm25", "main")
    before = [[h.model_dump() for h in hs] for hs in hits]
    h = hits[0][0]
    h.score, h.title = 9.0, "changed"
    h.metadata["url"] = "y"
    hits[0][1].metadata["k"] = 1
    c = hits[1][0].model_copy(update={"kb": "other"})
    assert c.kb == "other" and hits[1][0].kb == "main"
    assert [[h.model_dump() for h in hs] for hs in hits[1:]] == before[1:]
    assert hits[1][1].metadata == {"url": "x"} and hits[1][0].metadata == {}
    assert all(x.model_fields_set == set(Hit.model_fields) for hs in hits for x in hs)


def test_kb_search_hits_follow_the_index(tmp_path, data_dir):
    ps = list(itertools.islice(read_corpus(data_dir / "corpora" / "musique_train_passages_1890.jsonl"), 300))
    kb = KnowledgeBase.build(ps, tmp_path / "kb", KBConfig(method="bm25"), progress=False)
    qs = ["Who founded the company?", "river in Europe", "the"]
    ranked = _raw(kb.bm25, qs, 10)
    hits = kb.search(qs, 10)
    assert [[(h.id, h.score) for h in hs] for hs in hits] == [[(ps[r].id, s) for r, s in rs] for rs in ranked]
    by_id = {p.id: p for p in ps}
    assert all(h.text == by_id[h.id].text and h.title == by_id[h.id].title for hs in hits for h in hs)


def test_hits_from_arrays_equal_hits_from_lists():
    """The numba loop's (rows, scores) arrays give the hits their (row, score) lists give: entries
    scoring 0 (anywhere in a row) are no hit, the order is kept, scores are Python floats."""
    import json

    import numpy as np

    from agentrag.kb.indexes import ranked_lists

    table = [(f"p{i}", f"T{i}", f"text {i}", None if i % 2 else json.dumps({"i": i})) for i in range(6)]
    rows = np.array([[3, 1, 0], [5, 2, 4], [0, 1, 2]], dtype=np.int32)
    vals = np.array([[2.5, 1.0, 0.0], [0.0, 0.0, 0.0], [1.5, 0.0, 0.25]], dtype=np.float32)
    from_arrays = make_hits((rows, vals), table, "bm25", "main")
    assert from_arrays == make_hits(ranked_lists((rows, vals)), table, "bm25", "main")
    assert [[(h.id, h.score) for h in hs] for hs in from_arrays] == [[("p3", 2.5), ("p1", 1.0)], [],
                                                                      [("p0", 1.5), ("p2", 0.25)]]
    assert all(type(h.score) is float for hs in from_arrays for h in hs)
    assert from_arrays[2][1].metadata == {"i": 2} and from_arrays[0][1].metadata == {}
