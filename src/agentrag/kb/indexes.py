"""The search indexes of a knowledge base: BM25 (bm25s) and dense (FAISS); their fusion is in
:mod:`agentrag.kb.fusion` (``rrf_fuse`` is re-exported here).

Indexes return ``(row, score)`` pairs, rows being positions in the KB's passage list; the
:class:`~agentrag.kb.store.KnowledgeBase` turns rows into hits. All files are plain (json, npy,
faiss index); nothing is pickled.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentrag._extras import require
from agentrag.errors import UserError
from agentrag.kb.base import Embedder
from agentrag.kb.bm25_build import CHUNK_DOCS, build_bm25_files
from agentrag.kb.bm25_query import QueryTokenizer
from agentrag.kb.fusion import rrf_fuse  # re-exported: fusion lives in agentrag.kb.fusion
from agentrag.progress import Progress

log = logging.getLogger(__name__)

Ranked = list[tuple[int, float]]
INDEX_TYPES = ("flat", "hnsw", "ivfpq")
#: the numpy BM25 path scores a block of queries in one (queries x passages) float32 array of at most
#: this many cells (64 KB), a corpus larger than this one query at a time. Measured (benchmarks/retrieval.py
#: --bm25-only, index alone / bm25s numpy, batched): 1,971 passages 1.5-1.7 (blocks of 8) and 20,000 passages
#: 1.04 (one a time), where 1 << 18 cells (blocks of 133 and 13) gave 1.6 and 0.81-0.85
SCORE_CELLS = 1 << 14
#: BM25 retrieval backends: ``numba`` (bm25s's compiled loop), ``numpy`` (our vectorised numpy), ``auto``
#: (numba when it is installed). ``AGENTRAG_BM25_BACKEND`` overrides ``auto`` (e.g. to force numpy).
BM25_BACKENDS = ("auto", "numpy", "numba")
_NUMBA_KERNEL: Any = None


def resolve_bm25_backend(requested: str | None = None) -> str:
    """``numpy`` or ``numba``: ``requested`` unless it is ``auto``/None, then ``$AGENTRAG_BM25_BACKEND``,
    then numba if it can be imported. Asking for numba without it installed is a ``UserError``."""
    choice = requested if requested not in (None, "auto") else os.environ.get("AGENTRAG_BM25_BACKEND") or "auto"
    if choice not in BM25_BACKENDS:
        raise UserError(f"unknown BM25 backend {choice!r}; choose one of {', '.join(BM25_BACKENDS)}")
    if choice == "numpy":
        return "numpy"
    try:
        import numba  # noqa: F401
    except ImportError as exc:
        if choice == "numba":
            raise UserError("the numba BM25 backend needs numba: pip install 'agentrag[kb]'") from exc
        return "numpy"
    return "numba"


def _numba_kernel() -> Any:
    """bm25s's numba retrieval loop (``bm25s.numba.retrieve_utils``: per query, the score row summed
    posting list by posting list, then a heap top-k), compiled serial and ``nogil`` like bm25s's own
    ``n_threads=0`` path, but with ``cache=True``: the ~6 s compile happens once per machine (numba's
    cache, next to bm25s's files or in the user cache directory), later processes load it in ~0.3 s."""
    global _NUMBA_KERNEL
    if _NUMBA_KERNEL is None:
        from numba import njit

        retrieve_utils = require("bm25s.numba.retrieve_utils", "kb", purpose="the numba BM25 backend")
        try:
            _NUMBA_KERNEL = njit(nogil=True, cache=True)(retrieve_utils._retrieve_internal_jitted)
        except RuntimeError:  # no writable cache directory: compile in every process instead
            _NUMBA_KERNEL = njit(nogil=True)(retrieve_utils._retrieve_internal_jitted)
    return _NUMBA_KERNEL


class BM25Index:
    """Okapi BM25 by ``bm25s``, with a Snowball English stemmer and English stopwords by default."""

    def __init__(self, *, stemmer: str | None = "english", stopwords: str | None = "en",
                 backend: str | None = None) -> None:
        self.stemmer_name = stemmer
        self.stopwords = stopwords
        self.backend = resolve_bm25_backend(backend)  # "numpy" | "numba" (see resolve_bm25_backend)
        self.retriever: Any = None
        self.tokenizer: Any = None
        self.size = 0
        self.vocab = "tokenizer"  # or "index": a plain bm25s index, queries matched by token string
        self._query_tokenizer: QueryTokenizer | None = None  # made on the first search (see kb.bm25_query)

    def _make_tokenizer(self) -> Any:
        tokenization = require("bm25s.tokenization", "kb", purpose="the BM25 index")
        stemmer = None
        if self.stemmer_name:
            stemmer = require("Stemmer", "kb", purpose="BM25 stemming").Stemmer(self.stemmer_name)
        return tokenization.Tokenizer(stemmer=stemmer, stopwords=self.stopwords or [])

    def index(self, texts: Sequence[str]) -> None:
        bm25s = require("bm25s", "kb", purpose="the BM25 index")
        self.tokenizer = self._make_tokenizer()
        ids = self.tokenizer.tokenize(list(texts), return_as="ids", show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(ids, show_progress=False)
        self.size = len(texts)
        self._query_tokenizer = None

    def index_batches(self, batches: Iterable[list[str]], n: int | None = None) -> None:
        """Index texts given in batches into memory: built by the streaming builder in a
        temporary directory (so only a chunk's token ids are held at once), then read in. The
        result is identical to :meth:`index` on the concatenated texts. Prefer :meth:`build`,
        which leaves the index on disk."""
        import tempfile

        if n is None:
            texts = [t for batch in batches for t in batch]
            batches, n = [texts], len(texts)
        with tempfile.TemporaryDirectory(prefix="agentrag-bm25-") as tmp:
            built = type(self).build(Path(tmp) / "bm25", batches, n, stemmer=self.stemmer_name,
                                     stopwords=self.stopwords, mmap=False)
        self.retriever, self.tokenizer, self.size, self.vocab = built.retriever, built.tokenizer, built.size, "tokenizer"
        self._query_tokenizer = None

    @classmethod
    def build(cls, directory: Path, batches: Iterable[list[str]], n: int, *, stemmer: str | None = "english",
              stopwords: str | None = "en", chunk_docs: int = CHUNK_DOCS, key: str = "", mmap: bool = True,
              stats: dict[str, int] | None = None) -> BM25Index:
        """Build the index of ``n`` texts (given in batches) into ``directory`` in bounded memory,
        resumable after a kill (see :mod:`agentrag.kb.bm25_build`), and open it."""
        self = cls(stemmer=stemmer, stopwords=stopwords)
        if n:
            build_bm25_files(batches, n, directory, self._make_tokenizer(), chunk_docs=chunk_docs, key=key,
                             stats=stats)
        else:
            directory.mkdir(parents=True, exist_ok=True)
        self.size = n
        (directory / "bm25.json").write_text(json.dumps(
            {"stemmer": stemmer, "stopwords": stopwords, "size": n, "vocab": "tokenizer"}))
        return cls.load(directory, mmap=mmap)

    def search(self, queries: Sequence[str], k: int) -> list[Ranked]:
        if self.retriever is None or self.size == 0 or k <= 0:
            return [[] for _ in queries]
        if self.vocab == "index":
            import bm25s

            stemmer = None
            if self.stemmer_name:
                import Stemmer

                stemmer = Stemmer.Stemmer(self.stemmer_name)
            toks = bm25s.tokenize(list(queries), stopwords=self.stopwords or None, stemmer=stemmer,
                                  return_ids=False, show_progress=False)
            vocab = self.retriever.vocab_dict  # (its "" entry, if any, has no column: dropped)
            ncols = len(self.retriever.scores["indptr"]) - 1
            q: Any = [[vocab[t] for t in qt if t in vocab and vocab[t] < ncols] for qt in toks]
        else:  # what tokenize(update_vocab=False, return_as="ids") returns, less ids without a column
            if self._query_tokenizer is None:
                self._query_tokenizer = QueryTokenizer(self.tokenizer, len(self.retriever.scores["indptr"]) - 1)
            q = self._query_tokenizer(list(queries))
        k = min(k, self.size)
        if self.backend == "numba":
            return self._top_numba(q, k)
        out: list[Ranked] = []
        step = max(1, SCORE_CELLS // self.size)
        for lo in range(0, len(q), step):
            out.extend(self._top(q[lo:lo + step], k))
        return out

    def _top(self, queries: list[list[int]], k: int) -> list[Ranked]:
        """bm25s's numpy retrieval (``get_scores`` + ``selection.topk``) for a block of queries,
        with the same arithmetic and selection, so the same ranking, ties included, but a few
        vectorised calls per block instead of ~20 Python-level calls per query and token: every
        (query, token) column of the block is gathered at once and summed by one ``np.add.at`` on
        the block's score rows (in query-token order: bm25s's float32 sums, term by term), then
        ``argpartition`` + ``argsort`` per row as ``bm25s.selection._topk_numpy`` does. A block of
        one query (every query once the corpus exceeds :data:`SCORE_CELLS` passages) takes bm25s's
        per-list loop instead: on long posting lists the gather costs more than the calls it saves."""
        sc = self.retriever.scores
        data, indices, indptr = sc["data"], sc["indices"], sc["indptr"]
        ncols, n = len(indptr) - 1, self.size
        if len(queries) == 1:  # bm25s's own loop: per posting list, an np.add.at on its slices
            ids = [t for t in queries[0] if t < ncols]
            if not ids:
                return [[]]
            row = np.zeros(n, dtype=data.dtype)
            for a, b in zip(indptr[ids].tolist(), indptr[np.asarray(ids) + 1].tolist(), strict=True):
                np.add.at(row, indices[a:b], data[a:b])
            part1 = np.argpartition(row, -k)[-k:]
            top1 = row[part1]
            order1 = np.argsort(top1)[::-1]
            return [[(d, v) for d, v in zip(part1[order1].tolist(), top1[order1].tolist(), strict=True) if v > 0]]
        qi = np.fromiter((i for i, ids in enumerate(queries) for t in ids if t < ncols), dtype=np.int64)
        tok = np.fromiter((t for ids in queries for t in ids if t < ncols), dtype=np.int64)
        starts, ends = indptr[tok], indptr[tok + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        # positions of every entry of the gathered columns: start of its column + rank in it
        pos = np.arange(total, dtype=np.int64) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        scores = np.zeros((len(queries), n), dtype=data.dtype)
        np.add.at(scores.reshape(-1), np.repeat(qi * n, lengths) + indices[pos], data[pos])
        part = np.argpartition(scores, -k, axis=1)[:, -k:]
        top = np.take_along_axis(scores, part, axis=1)
        order = np.argsort(top, axis=1)[:, ::-1]
        rows, vals = np.take_along_axis(part, order, axis=1).tolist(), np.take_along_axis(top, order, axis=1).tolist()
        has = np.zeros(len(queries), dtype=bool)
        has[qi] = True
        return [[(d, v) for d, v in zip(r, s, strict=True) if v > 0] if h else []
                for r, s, h in zip(rows, vals, has.tolist(), strict=True)]

    def _top_numba(self, queries: list[list[int]], k: int) -> list[Ranked]:
        """bm25s's numba backend (``backend="numba"``, ``n_threads=0``) on our score arrays: the same
        float32 sums as the numpy path (token by token, in query order), so the same scores at every
        rank; among passages of equal score its heap may keep or order other ones than numpy's
        ``argpartition`` (see docs/kb.md). Token ids outside the index (words unseen when it was
        built) were dropped by :meth:`search`: the compiled loop does not check bounds."""
        if not queries:
            return []
        sc = self.retriever.scores
        # (fromiter, not np.cumsum of a list: that converts through numpy's wrapper, ~3 us a call)
        ptr = np.fromiter(itertools.accumulate(map(len, queries), initial=0), dtype=np.int32,
                          count=len(queries) + 1)
        flat = np.fromiter(itertools.chain.from_iterable(queries), dtype=np.int32, count=int(ptr[-1]))
        vals, rows = _numba_kernel()(flat, ptr, k, True, np.dtype(self.retriever.dtype),
                                     np.dtype(self.retriever.int_dtype), sc["data"], sc["indptr"], sc["indices"],
                                     int(sc["num_docs"]), None, None)
        return [[(d, v) for d, v in zip(r, s, strict=True) if v > 0]
                for r, s in zip(rows.tolist(), vals.tolist(), strict=True)]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        if self.retriever is not None:
            self.retriever.save(str(directory), show_progress=False)
            self.tokenizer.save_vocab(str(directory))
        (directory / "bm25.json").write_text(json.dumps(
            {"stemmer": self.stemmer_name, "stopwords": self.stopwords, "size": self.size, "vocab": self.vocab}))

    @classmethod
    def adopt(cls, source: Path, directory: Path, *, stemmer: str | None = "english",
              stopwords: str | None = "en") -> BM25Index:
        """Copy a bm25s index directory (``retriever.save(dir)``, e.g. FlashRAG's) into ``directory``.

        Queries are tokenized like ``bm25s.tokenize(..., stopwords, stemmer)``, which must match how
        the index was built (FlashRAG: English stopwords and the Snowball English stemmer)."""
        import bm25s

        if not (source / "params.index.json").exists():
            raise UserError(f"{source}: not a bm25s index directory (no params.index.json)")
        directory.mkdir(parents=True, exist_ok=True)
        for f in source.iterdir():
            if f.is_file() and f.name != "bm25.json":
                shutil.copyfile(f, directory / f.name)
        retriever = bm25s.BM25.load(str(directory), load_corpus=False, mmap=True)
        self = cls(stemmer=stemmer, stopwords=stopwords)
        self.size = int(retriever.scores["num_docs"])
        self.vocab = "tokenizer" if (directory / "vocab.tokenizer.json").exists() else "index"
        (directory / "bm25.json").write_text(json.dumps(
            {"stemmer": stemmer, "stopwords": stopwords, "size": self.size, "vocab": self.vocab}))
        return cls.load(directory, mmap=True)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = False, backend: str | None = None) -> BM25Index:
        """Open a saved index; with ``mmap`` the score matrix stays on disk (pages read on demand).
        ``backend``: see :func:`resolve_bm25_backend` (numba compiles on the first search)."""
        bm25s = require("bm25s", "kb", purpose="the BM25 index")
        meta = json.loads((directory / "bm25.json").read_text())
        self = cls(stemmer=meta["stemmer"], stopwords=meta["stopwords"], backend=backend)
        self.size = int(meta["size"])
        self.vocab = meta.get("vocab", "tokenizer")
        if self.size:
            self.retriever = bm25s.BM25.load(str(directory), load_corpus=False, mmap=mmap)
            for name in ("data", "indices", "indptr"):  # plain views of the mapping: np.memmap's
                arr = self.retriever.scores[name]  # per-slice Python hooks cost ~10 us a query
                self.retriever.scores[name] = arr.view(np.ndarray) if isinstance(arr, np.memmap) else arr
            if self.vocab == "tokenizer":
                self.tokenizer = self._make_tokenizer()
                self.tokenizer.load_vocab(str(directory))
        return self


class DenseIndex:
    """Normalised vectors in a FAISS inner-product index: ``flat`` (exact), ``hnsw`` or ``ivfpq``."""

    def __init__(self, dim: int, index_type: str = "flat", *, hnsw_m: int = 32, ef_search: int = 128,
                 nlist: int | None = None, pq_m: int | None = None, nprobe: int = 16) -> None:
        if index_type not in INDEX_TYPES:
            raise UserError(f"unknown dense index type {index_type!r}; choose one of {', '.join(INDEX_TYPES)}")
        self.dim, self.index_type = dim, index_type
        self.hnsw_m, self.ef_search, self.nlist, self.pq_m, self.nprobe = hnsw_m, ef_search, nlist, pq_m, nprobe
        self.index: Any = None
        self.mmapped = False
        self.path: Path | None = None

    def _new(self, n_train: int) -> Any:
        faiss = require("faiss", "kb", purpose="the dense index")
        if self.index_type == "flat":
            return faiss.IndexFlatIP(self.dim)
        if self.index_type == "hnsw":
            idx: Any = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            idx.hnsw.efSearch = self.ef_search
            return idx
        nlist = self.nlist or max(1, min(int(4 * np.sqrt(max(n_train, 1))), n_train // 39))
        pq_m = self.pq_m or next(m for m in (48, 32, 24, 16, 12, 8, 4, 2, 1) if self.dim % m == 0)
        if n_train < 39 * nlist or n_train < 256:
            raise UserError(f"index type 'ivfpq' needs at least max(256, 39*nlist={39 * nlist}) passages to "
                            f"train, got {n_train}; use index type flat or hnsw for small corpora "
                            "(index_type='flat' in Python, --index-type flat on the CLI)")
        ivf: Any = faiss.IndexIVFPQ(faiss.IndexFlatIP(self.dim), self.dim, nlist, pq_m, 8,
                                    faiss.METRIC_INNER_PRODUCT)
        ivf.nprobe = self.nprobe
        return ivf

    def add(self, vectors: np.ndarray, *, chunk: int = 4096) -> None:
        """Add vectors (e.g. a memmap), ``chunk`` rows at a time: never copied whole, and IVF-PQ
        encoding holds ~40 KB per vector in flight (measured), so chunks bound the build's memory.
        An untrained index (ivfpq) is first trained on at most ``40 * nlist`` (>= 65,536) evenly
        spaced rows (FAISS's k-means wants 39-256 points per list)."""
        n = len(vectors)
        if getattr(self, "mmapped", False):  # a memory-mapped index is read-only: read it into RAM first
            self.mmapped = False
            self.load_index_copy()
        if self.index is None:
            self.index = self._new(n)
            if not self.index.is_trained:
                max_train = max(65536, 40 * int(self.index.nlist))
                rows = np.linspace(0, n - 1, num=min(n, max_train)).astype(np.int64) if n > max_train else np.arange(n)
                self.index.train(training_sample(vectors, rows))
        for lo in range(0, n, chunk):
            self.index.add(np.ascontiguousarray(vectors[lo:lo + chunk], dtype=np.float32))
            if lo // chunk % 8 == 7:  # keep at most ~32k rows (100 MB at 768 dims) of the memmap resident
                drop_pages(vectors)
        drop_pages(vectors)

    @property
    def size(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal)

    def search_vectors(self, q: np.ndarray, k: int) -> list[Ranked]:
        if self.size == 0 or k <= 0:
            return [[] for _ in range(len(q))]
        scores, rows = self.index.search(np.ascontiguousarray(q, dtype=np.float32), min(k, self.size))
        return [[(r, s) for r, s in zip(rr, sr, strict=True) if r >= 0]
                for rr, sr in zip(rows.tolist(), scores.tolist(), strict=True)]

    def load_index_copy(self) -> None:
        faiss = require("faiss", "kb", purpose="the dense index")
        assert self.path is not None  # only called after load_index
        self.index = faiss.read_index(str(self.path))
        if self.index_type == "ivfpq":
            faiss.extract_index_ivf(self.index).nprobe = self.nprobe

    def save(self, path: Path) -> None:
        faiss = require("faiss", "kb", purpose="the dense index")
        if self.index is not None:
            tmp = path.with_name(path.name + ".tmp")
            faiss.write_index(self.index, str(tmp))
            os.replace(tmp, path)

    def load_index(self, path: Path) -> None:
        """Read the index; IVF inverted lists are memory-mapped read-only (measured: a 200k-passage
        IVF-PQ index adds 6 MB of anonymous memory instead of 17; pages are shared between
        processes). FAISS 1.15 copies flat and HNSW indexes into RAM either way."""
        faiss = require("faiss", "kb", purpose="the dense index")
        self.path = path
        if path.exists():
            flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if self.index_type == "ivfpq" else 0
            self.index = faiss.read_index(str(path), flags)
            self.mmapped = bool(flags)
            if self.index_type == "hnsw":
                hnsw: Any = faiss.downcast_index(self.index)
                hnsw.hnsw.efSearch = self.ef_search
            elif self.index_type == "ivfpq":
                faiss.extract_index_ivf(self.index).nprobe = self.nprobe


def training_sample(vectors: np.ndarray, rows: np.ndarray, *, block: int = 8192) -> np.ndarray:
    """``vectors[rows]`` as a float32 array, gathered ``block`` rows at a time with the memmap's
    pages released after each block: evenly spaced rows touch almost every page of the file, and
    gathered at once they would all count in the build's resident memory (measured: +600 MB at
    200,000 x 768 dims), a term that grows with N while the sample itself grows with sqrt(N)."""
    out = np.empty((len(rows), vectors.shape[1]), dtype=np.float32)
    for lo in range(0, len(rows), block):
        out[lo:lo + block] = vectors[rows[lo:lo + block]]
        drop_pages(vectors)
    return out


def drop_pages(arr: Any) -> None:
    """Release the resident pages of a memory-mapped array (or a view of one) from this
    process: read or written, they stay in the OS page cache but no longer count in its RSS, so
    streaming over a 60 GB embeddings file keeps the build's resident memory flat."""
    import mmap

    while arr is not None and not isinstance(arr, np.memmap):
        arr = getattr(arr, "base", None)
    m = getattr(arr, "_mmap", None)
    if m is None or not hasattr(m, "madvise"):
        return
    m.flush()
    m.madvise(mmap.MADV_DONTNEED)


def embed_to_memmap(embedder: Embedder, texts: Sequence[str], path: Path, *, chunk: int = 512,
                    progress: bool = True, key: str = "", report: Progress | None = None) -> np.ndarray:
    """Embed passages into a float32 memmap at ``path``, resuming an interrupted run.

    Texts are processed longest first (less padding), in chunks; after each chunk the memmap is
    flushed and ``<path>.progress.json`` records how many chunks are done, so rerunning after a
    kill continues where it stopped (``key`` should identify the texts, e.g. a hash of their ids).
    A progress bar with ETA goes to stderr (``progress``); ``report("embedding", done, n)`` hears
    of each chunk.
    """
    from tqdm import tqdm

    n, dim = len(texts), int(embedder.dim)
    order = np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=n), kind="stable")
    state_path = path.with_name(path.name + ".progress.json")
    fingerprint = f"{n}:{dim}:{getattr(embedder, 'name', type(embedder).__name__)}:{chunk}:{key}"
    done = 0
    if path.exists() and state_path.exists():
        state = json.loads(state_path.read_text())
        if state.get("fingerprint") == fingerprint:
            done = int(state["done_chunks"])
            log.info("resuming embeddings: %d of %d passages already embedded", min(done * chunk, n), n)
    mode = "r+" if done else "w+"
    mm = np.lib.format.open_memmap(path, mode=mode, dtype=np.float32, shape=(n, dim))
    n_chunks = (n + chunk - 1) // chunk
    with tqdm(total=n, initial=min(done * chunk, n), unit="psg", desc="embedding", disable=not progress,
              dynamic_ncols=True) as bar:
        if report is not None:
            report("embedding", min(done * chunk, n), n)
        for c in range(done, n_chunks):
            idx = order[c * chunk:(c + 1) * chunk]
            mm[idx] = embedder.embed([texts[j] for j in idx], kind="passage")
            mm.flush()
            if c % 64 == 63:
                drop_pages(mm)
            state_path.write_text(json.dumps({"fingerprint": fingerprint, "done_chunks": c + 1}))
            bar.update(len(idx))
            if report is not None:
                report("embedding", min((c + 1) * chunk, n), n)
    drop_pages(mm)
    return np.asarray(mm)


__all__ = ["BM25Index", "BM25_BACKENDS", "resolve_bm25_backend", "DenseIndex", "rrf_fuse", "embed_to_memmap", "INDEX_TYPES"]
