"""The search indexes of a knowledge base: BM25 (bm25s) and dense (FAISS); their fusion is in
:mod:`agentrag.kb.fusion` (``rrf_fuse`` is re-exported here).

Indexes return ``(row, score)`` pairs, rows being positions in the KB's passage list; the
:class:`~agentrag.kb.store.KnowledgeBase` turns rows into hits. All files are plain (json, npy,
faiss index); nothing is pickled.
"""

from __future__ import annotations

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
from agentrag.kb.fusion import rrf_fuse  # re-exported: fusion lives in agentrag.kb.fusion

log = logging.getLogger(__name__)

Ranked = list[tuple[int, float]]
INDEX_TYPES = ("flat", "hnsw", "ivfpq")


class BM25Index:
    """Okapi BM25 by ``bm25s``, with a Snowball English stemmer and English stopwords by default."""

    def __init__(self, *, stemmer: str | None = "english", stopwords: str | None = "en") -> None:
        self.stemmer_name = stemmer
        self.stopwords = stopwords
        self.retriever: Any = None
        self.tokenizer: Any = None
        self.size = 0
        self.vocab = "tokenizer"  # or "index": a plain bm25s index, queries matched by token string

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

    def index_batches(self, batches: Iterable[list[str]], n: int | None = None) -> None:
        """Index texts given in batches (e.g. streamed from the passage store): the texts are
        tokenized batch by batch, so only token ids (not the texts) are held at once. The result is
        identical to :meth:`index` on the concatenated texts."""
        import bm25s

        self.tokenizer = self._make_tokenizer()
        ids: list[list[int]] = []
        for batch in batches:
            ids.extend(self.tokenizer.tokenize(list(batch), return_as="ids", show_progress=False))
        if n is not None and len(ids) != n:
            raise UserError(f"BM25 indexing read {len(ids)} texts, expected {n}; the passage store is damaged")
        self.retriever = bm25s.BM25()
        self.retriever.index(ids, show_progress=False)
        self.size = len(ids)

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
            q: Any = [[t for t in qt if t in self.retriever.vocab_dict] or [""] for qt in toks]
        else:
            q = self.tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
        docs, scores = self.retriever.retrieve(q, k=min(k, self.size), show_progress=False, n_threads=0)
        return [[(d, s) for d, s in zip(dr, sr, strict=True) if s > 0]
                for dr, sr in zip(docs.tolist(), scores.tolist(), strict=True)]

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
    def load(cls, directory: Path, *, mmap: bool = False) -> BM25Index:
        """Open a saved index; with ``mmap`` the score matrix stays on disk (pages read on demand)."""
        bm25s = require("bm25s", "kb", purpose="the BM25 index")
        meta = json.loads((directory / "bm25.json").read_text())
        self = cls(stemmer=meta["stemmer"], stopwords=meta["stopwords"])
        self.size = int(meta["size"])
        self.vocab = meta.get("vocab", "tokenizer")
        if self.size:
            self.retriever = bm25s.BM25.load(str(directory), load_corpus=False, mmap=mmap)
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
                            f"train, got {n_train}; use --set index.type=flat or hnsw for small corpora")
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
                rows = np.linspace(0, n - 1, num=min(n, max_train)).astype(np.int64) if n > max_train else slice(None)
                self.index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
        for lo in range(0, n, chunk):
            self.index.add(np.ascontiguousarray(vectors[lo:lo + chunk], dtype=np.float32))

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


def embed_to_memmap(embedder: Embedder, texts: Sequence[str], path: Path, *, chunk: int = 512,
                    progress: bool = True, key: str = "") -> np.ndarray:
    """Embed passages into a float32 memmap at ``path``, resuming an interrupted run.

    Texts are processed longest first (less padding), in chunks; after each chunk the memmap is
    flushed and ``<path>.progress.json`` records how many chunks are done, so rerunning after a
    kill continues where it stopped (``key`` should identify the texts, e.g. a hash of their ids).
    A progress bar with ETA goes to stderr.
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
        for c in range(done, n_chunks):
            idx = order[c * chunk:(c + 1) * chunk]
            mm[idx] = embedder.embed([texts[j] for j in idx], kind="passage")
            mm.flush()
            state_path.write_text(json.dumps({"fingerprint": fingerprint, "done_chunks": c + 1}))
            bar.update(len(idx))
    return np.asarray(mm)


__all__ = ["BM25Index", "DenseIndex", "rrf_fuse", "embed_to_memmap", "INDEX_TYPES"]
