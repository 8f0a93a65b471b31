"""Streaming BM25 build (agentrag.kb.bm25_build): the same index as bm25s's in-memory build,
resumable after a kill, holding one chunk of texts at a time."""

import itertools
import json

import numpy as np
import pytest

from agentrag.kb import KBConfig, KnowledgeBase, bm25_build
from agentrag.kb.indexes import BM25Index
from agentrag.kb.ingest import questions, read_corpus

ARRAYS = ("data", "indices", "indptr")


@pytest.fixture(scope="module")
def corpus(data_dir):
    texts = [p.contents for p in read_corpus(data_dir / "corpora" / "musique_train_passages_1890.jsonl")]
    texts += ["", "the of and", texts[3]]  # an empty document, a stopwords-only one, a duplicate
    qs = [q for _, q, _ in itertools.islice(questions(data_dir / "musique" / "train_397.jsonl"), 120)]
    return texts, qs


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    texts, _ = corpus
    ref = BM25Index()
    ref.index(texts)  # bm25s's own in-memory build, all texts at once
    d = tmp_path_factory.mktemp("ref") / "bm25"
    ref.save(d)
    return ref, d


def _batches(texts, size=300):
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def _same_files(a, b):
    for name in ARRAYS:
        x, y = np.load(a / f"{name}.csc.index.npy"), np.load(b / f"{name}.csc.index.npy")
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    for f in ("vocab.index.json", "vocab.tokenizer.json", "params.index.json"):
        assert json.loads((a / f).read_text()) == json.loads((b / f).read_text()), f


@pytest.mark.parametrize("chunk", [5, 97, 100_000])
def test_streamed_index_is_bm25s_index_and_ranks_the_same(corpus, reference, tmp_path, chunk):
    texts, qs = corpus
    ref, ref_dir = reference
    stats: dict = {}
    got = BM25Index.build(tmp_path / "bm25", _batches(texts), len(texts), chunk_docs=chunk, stats=stats)
    _same_files(ref_dir, tmp_path / "bm25")
    assert got.search(qs, 10) == ref.search(qs, 10)
    assert stats["max_chunk_docs"] == min(chunk, len(texts))
    assert stats["chunks"] == -(-len(texts) // chunk)
    assert not (tmp_path / "bm25.work").exists()


def test_later_chunks_add_new_words(tmp_path):
    """Words first seen after the first chunk are indexed (the former batched build froze the
    vocabulary after its first batch of 5,000 texts)."""
    texts = ["alpha beta"] * 5 + ["zebra crossing"]
    idx = BM25Index.build(tmp_path / "bm25", [texts], len(texts), chunk_docs=2)
    assert [r for r, _ in idx.search(["zebra"], 3)[0]] == [5]


class Killed(Exception):
    pass


def _killing(texts, after):
    for i, t in enumerate(texts):
        if i == after:
            raise Killed
        yield [t]


def test_resume_after_a_kill_skips_the_finished_chunks(corpus, reference, tmp_path, monkeypatch):
    texts, qs = corpus
    ref, ref_dir = reference
    d = tmp_path / "bm25"
    with pytest.raises(Killed):
        BM25Index.build(d, _killing(texts, 1000), len(texts), chunk_docs=300, key="k")
    state = json.loads((tmp_path / "bm25.work" / "progress.json").read_text())
    assert state["done_chunks"] == 3
    tokenized = []
    real = bm25_build.np.savez
    monkeypatch.setattr(bm25_build.np, "savez", lambda path, **kw: (tokenized.append(len(kw["length"])),
                                                                     real(path, **kw)))
    stats: dict = {}
    got = BM25Index.build(d, _batches(texts), len(texts), chunk_docs=300, key="k", stats=stats)
    assert stats["resumed_chunks"] == 3 and sum(tokenized) == len(texts) - 900
    _same_files(ref_dir, d)
    assert got.search(qs, 10) == ref.search(qs, 10)


def test_other_texts_do_not_resume(corpus, tmp_path):
    texts, _ = corpus
    d = tmp_path / "bm25"
    with pytest.raises(Killed):
        BM25Index.build(d, _killing(texts, 700), len(texts), chunk_docs=300, key="first")
    stats: dict = {}
    BM25Index.build(d, _batches(texts), len(texts), chunk_docs=300, key="second", stats=stats)
    assert stats["resumed_chunks"] == 0


def test_wrong_count_is_a_named_error(corpus, tmp_path):
    from agentrag.errors import UserError

    texts, _ = corpus
    with pytest.raises(UserError, match="expected"):
        BM25Index.build(tmp_path / "bm25", _batches(texts), len(texts) + 1, chunk_docs=500)


def test_kb_build_resumes_bm25_after_a_kill(data_dir, tmp_path, monkeypatch):
    ps = list(itertools.islice(read_corpus(data_dir / "corpora" / "2wiki_passages_6119.jsonl"), 700))
    ref = KnowledgeBase.build(ps, tmp_path / "ref", KBConfig(method="bm25"), progress=False)
    calls = []
    real = bm25_build.np.savez

    def dies_on_third(path, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise Killed
        real(path, **kw)

    monkeypatch.setattr(bm25_build.np, "savez", dies_on_third)
    with pytest.raises(Killed):
        KnowledgeBase.build(ps, tmp_path / "kb", KBConfig(method="bm25"), progress=False, bm25_chunk=100)
    assert (tmp_path / "kb.partial" / "bm25.work" / "progress.json").exists()
    calls.clear()
    monkeypatch.setattr(bm25_build.np, "savez", lambda path, **kw: (calls.append(1), real(path, **kw)))
    kb = KnowledgeBase.build(ps, tmp_path / "kb", KBConfig(method="bm25"), progress=False, bm25_chunk=100)
    assert len(calls) == 5  # chunks 3..7 of 7
    qs = ["Who directed the film?", "Where was the composer born?"]
    assert [[h.id for h in hs] for hs in kb.search(qs, 10)] == [[h.id for h in hs] for hs in ref.search(qs, 10)]
    assert not (tmp_path / "kb" / "bm25.work").exists()


def test_build_reads_do_not_map_files_into_the_process(tmp_path):
    """Pages a build streams over (embeddings memmap, passage store) must not pile up in its RSS."""
    from agentrag.kb.indexes import drop_pages
    from agentrag.kb.passages import PassageStore
    from agentrag.records import Passage

    path = tmp_path / "e.npy"
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(2000, 16))
    mm[:] = 2.0
    drop_pages(np.asarray(mm))  # a view of the memmap, as embed_to_memmap returns
    drop_pages(np.zeros(3))  # not mapped: nothing to do
    assert float(mm[1999, 15]) == 2.0 and (np.load(path) == 2.0).all()
    w = PassageStore(tmp_path / "p.sqlite", writable=True)
    w.append([Passage(id="a", text="x")])
    w.finish()
    assert w._conn().execute("PRAGMA mmap_size").fetchone()[0] == 0
    assert PassageStore(tmp_path / "p.sqlite")._conn().execute("PRAGMA mmap_size").fetchone()[0] > 0


def _mapped_rss_kb(path) -> int:
    """Resident KB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps", encoding="utf-8"):
        if "-" in line.split(" ", 1)[0]:  # a mapping's header line
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_ivfpq_training_sample_does_not_keep_the_embeddings_file_resident(tmp_path):
    """The IVF-PQ training sample is spread over the whole embeddings memmap: gathered at once, every
    page of the file stays in the build's RSS (a term linear in N); gathered in blocks, none does."""
    from agentrag.kb.indexes import drop_pages, training_sample

    path = tmp_path / "emb.npy"
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(8192, 512))  # 16 MB
    mm[:] = np.arange(8192, dtype=np.float32)[:, None]
    mm.flush()
    drop_pages(mm)
    del mm
    vecs = np.load(path, mmap_mode="r")
    rows = np.linspace(0, 8191, num=2730).astype(np.int64)  # every 3rd row: every page of the file
    sample = training_sample(vecs, rows, block=256)
    assert sample.dtype == np.float32 and (sample[:, 0] == rows).all() and (sample[:, -1] == rows).all()
    assert _mapped_rss_kb(path) < 2048, _mapped_rss_kb(path)  # at most ~a block of pages
    naive = np.ascontiguousarray(vecs[rows])  # what the build did before: the whole file resident
    assert (naive == sample).all() and _mapped_rss_kb(path) > 12 * 1024
