"""The knowledge base: a directory of plain files with BM25, dense and hybrid search.

Layout of a KB directory::

    params.json      versions, config, embedder, index type, counts, build timings
    passages.sqlite  the passages (row = position in the indexes; id and title+text hash indexed),
                     read lazily (see agentrag.kb.passages); KBs of earlier versions kept
                     passages.jsonl and are converted on first load
    bm25/            bm25s index files (json + npy), memory-mapped on load; built in chunks
                     (kb.bm25_build), resumable from ``<dir>.partial/bm25.work``
    dense.faiss      FAISS index of the normalised passage embeddings (absent for --method bm25)
    gold.json        optional: question id -> gold passage ids (from raw multi-hop files)

``build`` writes into ``<dir>.partial`` and renames it when complete, so an interrupted build
leaves no half-written KB (and rerunning resumes the embeddings from the partial directory).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentrag.config import load_config
from agentrag.errors import UserError
from agentrag.kb.base import Embedder, apply_threshold
from agentrag.kb.bm25_build import CHUNK_DOCS
from agentrag.kb.config import (
    METHODS,
    BM25Config,
    EmbedderConfig,
    HybridConfig,
    IndexConfig,
    KBConfig,
)
from agentrag.kb.fusion import fuse
from agentrag.kb.hits import PassageRows, make_hits
from agentrag.kb.indexes import BM25Index, DenseIndex, Ranked, embed_to_memmap
from agentrag.kb.passages import FILE as PASSAGES_FILE
from agentrag.kb.passages import Contents, PassageStore
from agentrag.paths import check_out_dir
from agentrag.progress import Progress
from agentrag.records import Hit, Passage, read_jsonl

log = logging.getLogger(__name__)

KB_FORMAT_VERSION = 1

def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in ("agentrag", "bm25s", "faiss-cpu", "sentence-transformers", "onnxruntime", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)



def _counted(passages: Iterable[Passage], start: int, beat: Progress, every: int = 1000) -> Iterator[Passage]:
    """``passages`` as they are, telling ``beat`` how many went through (every ``every``)."""
    n = start
    for p in passages:
        yield p
        n += 1
        if n % every == 0:
            beat("ingest", n, 0)


def _counted_batches(batches: Iterable[list[str]], total: int, beat: Progress) -> Iterator[list[str]]:
    n = 0
    for b in batches:
        yield b
        n += len(b)
        beat("bm25", min(n, total), total)

class KnowledgeBase:
    """Passages with BM25, dense and hybrid search; implements the Retriever protocol.

    Passages stay on disk (:class:`~agentrag.kb.passages.PassageStore`); hits read only the
    passages they return. A KB built with ``method="bm25"`` has no dense index (no embedding).
    """

    def __init__(self, directory: Path, config: KBConfig, store: PassageStore, bm25: BM25Index,
                 dense: DenseIndex | None, embedder: Embedder | None, params: dict[str, Any]) -> None:
        self.directory, self.config, self.params = directory, config, params
        self.store, self.bm25, self.dense = store, bm25, dense
        self._embedder = embedder
        self._lock = threading.RLock()
        self._rows: PassageRows | None = None  # the store's rows for search (in memory when small)
        #: ``build_kb`` found this KB complete and built from the same inputs, and reused it
        self.reused = False

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def build(cls, passages: Iterable[Passage], out_dir: str | os.PathLike[str], config: KBConfig | None = None,
              *, embedder: Embedder | None = None, gold: dict[str, list[str]] | None = None,
              overwrite: bool = False, progress: bool = True, dedupe: bool = False,
              bm25_chunk: int = CHUNK_DOCS, report: Progress | None = None,
              params: dict[str, Any] | None = None) -> KnowledgeBase:
        """Index ``passages`` into a new KB directory (built in ``<dir>.partial``, then renamed).

        Passages are streamed into the passage store in chunks (bounded memory); rerunning after a
        kill skips the passages already stored and the embeddings already computed. With
        ``dedupe``, a passage whose (normalised) title and text is already stored is skipped.
        ``config.method == "bm25"`` builds no dense index (nothing is embedded). BM25 is built
        ``bm25_chunk`` passages at a time (memory bounded by the chunk and the vocabulary).
        ``progress``: a tqdm bar over the embedding; ``report(stage, done, total)`` hears of each
        stage (``ingest``, ``bm25``, ``embedding``) as it starts and as passages go through it.
        ``params``: extra entries for ``params.json`` (``build_kb`` records what it was built from).
        """
        beat: Progress = report or (lambda stage, done, total: None)
        config = config or KBConfig()
        out = check_out_dir(out_dir)
        if out.exists() and not overwrite:
            raise UserError(f"{out} already exists; pass another output directory (the CLI's --out), or overwrite=True (--overwrite) to replace it")
        partial = check_out_dir(out.with_name(out.name + ".partial"))
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        fresh = not partial.exists()
        partial.mkdir(parents=True, exist_ok=True)  # kept on a kill or a later failure: the build resumes
        store = PassageStore(partial / PASSAGES_FILE, writable=True)
        fingerprint = json.dumps(config.model_dump(mode="json"), sort_keys=True) + f"|dedupe={dedupe}"
        if store.get_meta("fingerprint") not in (None, fingerprint):
            store.close()
            (partial / PASSAGES_FILE).unlink()
            fresh = not partial.exists()
        partial.mkdir(parents=True, exist_ok=True)  # kept on a kill or a later failure: the build resumes
        store = PassageStore(partial / PASSAGES_FILE, writable=True)
        store.set_meta("fingerprint", fingerprint)
        if store.get_meta("ingested") != "1":
            skip = store.consumed()
            if skip:
                log.info("resuming the build: %d passages already stored", skip)
            beat("ingest", skip, 0)  # the total is known only at the end of the stream
            try:
                store.append(_counted(itertools.islice(passages, skip, None), skip, beat), dedupe=dedupe)
            except UserError:
                if fresh:  # bad input leaves nothing behind
                    store.close()
                    shutil.rmtree(partial, ignore_errors=True)
                raise
            store.finish()
            store.set_meta("ingested", "1")
        n = len(store)
        beat("ingest", n, n)
        timings["ingest"] = time.perf_counter() - t0
        if not n:
            raise UserError("no passages to index; check the corpus files")
        t0 = time.perf_counter()
        key = store.get_meta("ids_sha1") or _ids_key(store)
        store.set_meta("ids_sha1", key)
        if store.get_meta("bm25_done") != "1":  # streamed in chunks, resumable (kb.bm25_build)
            beat("bm25", 0, n)
            BM25Index.build(partial / "bm25", _counted_batches(store.texts(), n, beat), n, stemmer=config.bm25.stemmer,
                            stopwords=config.bm25.stopwords, chunk_docs=bm25_chunk, key=key)
            store.set_meta("bm25_done", "1")
            beat("bm25", n, n)
        timings["bm25"] = time.perf_counter() - t0
        emb: Embedder | None = None
        dense: DenseIndex | None = None
        if config.method != "bm25":
            t0 = time.perf_counter()
            beat("embedding", 0, n)  # loading the embedder is part of the stage (seconds to a minute)
            emb = embedder or _load_embedder(config)
            vecs = embed_to_memmap(emb, Contents(store), partial / "embeddings.npy", progress=progress, key=key,
                                   report=report)
            timings["embed"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            dense = _new_dense(int(emb.dim), config)
            dense.add(vecs)
            dense.save(partial / "dense.faiss")
            timings["dense_index"] = time.perf_counter() - t0
            del vecs
            for f in ("embeddings.npy", "embeddings.npy.progress.json"):
                (partial / f).unlink(missing_ok=True)
        if gold:
            _write_json(partial / "gold.json", gold)
        params = {**_params(config, emb, n, timings), **(params or {})}
        _write_json(partial / "params.json", params)
        store.close()
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
        log.info("built KB %s: %d passages (%s)", out, n, ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
        return cls._open(out, embedder=emb)

    @classmethod
    def create(cls, directory: str | os.PathLike[str], config: KBConfig | None = None, *,
               embedder: Embedder | None = None) -> KnowledgeBase:
        """An empty KB (e.g. a secondary distractor KB) to fill with :meth:`add`."""
        config = config or KBConfig()
        d = Path(directory)
        if (d / "params.json").exists():
            raise UserError(f"{d} already holds a knowledge base; load it with KnowledgeBase.load")
        d.mkdir(parents=True, exist_ok=True)
        store = PassageStore(d / PASSAGES_FILE, writable=True)
        store.finish()
        bm25 = BM25Index(stemmer=config.bm25.stemmer, stopwords=config.bm25.stopwords)
        bm25.save(d / "bm25")
        emb = embedder or _load_embedder(config)
        params = _params(config, emb, 0, {})
        _write_json(d / "params.json", params)
        return cls(d, config, store, bm25, _new_dense(int(emb.dim), config), emb, params)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, embedder: Embedder | None = None,
             overrides: Sequence[str] = ()) -> KnowledgeBase:
        """Open a KB directory (no original corpus needed). Passages stay on disk, the BM25 index
        is memory-mapped and the embedder loads on first dense search.

        ``overrides`` (``key=value``) change search-time settings only: ``name``, ``method``,
        ``hybrid.*``, ``index.ef_search``, ``index.nprobe``, ``embedder.batch_size``.
        A KB written by an earlier version (``passages.jsonl``) is converted once in place.
        """
        return cls._open(directory, embedder=embedder, overrides=overrides)

    @classmethod
    def _open(cls, directory: str | os.PathLike[str], *, embedder: Embedder | None = None,
              overrides: Sequence[str] = ()) -> KnowledgeBase:
        d = Path(directory)
        if not (d / "params.json").exists():
            raise UserError(f"{d} is not a knowledge base (no params.json); build one with `agentrag kb build`")
        params = json.loads((d / "params.json").read_text(encoding="utf-8"))
        if params.get("format") != "agentrag-kb" or params.get("format_version", 0) > KB_FORMAT_VERSION:
            raise UserError(f"{d}/params.json: not an agentrag KB of a supported format version")
        for item in overrides:
            key = item.partition("=")[0].strip()
            if not (key in ("name", "method", "index.ef_search", "index.nprobe", "embedder.batch_size")
                    or key.startswith("hybrid.")):
                raise UserError(f"--set {item!r}: {key!r} is fixed when the KB is built; at search time only "
                                "name, method, hybrid.*, index.ef_search, index.nprobe, embedder.batch_size "
                                "can change")
        config = load_config(KBConfig, None, overrides, base=params["config"])
        store = _open_store(d)
        n = len(store)
        bm25 = BM25Index.load(d / "bm25", mmap=True, backend=config.bm25.backend)
        if bm25.size != n:
            log.info("BM25 index of %s is stale (%d of %d passages); re-indexing", d, bm25.size, n)
            bm25 = _rebuild_bm25(d, store, n, config)
        dense: DenseIndex | None = None
        if params.get("embedder") is not None:
            dim = int(params["embedder"]["dim"])
            if embedder is not None and int(embedder.dim) != dim:
                raise UserError(f"embedder dim {embedder.dim} does not match the KB's {dim} ({d}/params.json)")
            dense = _new_dense(dim, config)
            dense.load_index(d / "dense.faiss")
            if dense.size != n:
                raise UserError(f"{d}: dense index holds {dense.size} vectors but there are {n} passages; "
                                "the KB is damaged, rebuild it")
        return cls(d, config, store, bm25, dense, embedder, params)

    # ---- incremental add ----------------------------------------------------------------------
    def add(self, passages: list[Passage]) -> None:
        """Append passages: embedded and added to the dense index, BM25 re-indexed, all persisted."""
        if not passages:
            return
        with self._lock:
            _check_unique(passages)
            dense = self._need_dense("add passages to")
            vecs = self.embedder.embed([p.contents for p in passages], kind="passage")
            writer = PassageStore(self.store.path, writable=True)
            writer.append(passages)
            writer.finish()
            writer.close()
            self.store = PassageStore(self.store.path)
            n = len(self.store)
            dense.add(vecs)
            dense.save(self.directory / "dense.faiss")
            self.bm25 = _rebuild_bm25(self.directory, self.store, n, self.config)
            self.params["counts"] = {"passages": n}
            self.params.pop("inputs_key", None)  # no longer what its corpus files alone give
            _write_json(self.directory / "params.json", self.params)

    # ---- search -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = _load_embedder(self.config)
        return self._embedder

    def _need_dense(self, what: str) -> DenseIndex:
        if self.dense is None:
            raise UserError(f"KB {self.name!r} ({self.directory}) was built with --method bm25 and has no dense "
                            f"index; cannot {what} it. Use --method bm25, or rebuild with dense/hybrid")
        return self.dense

    def rank(self, queries: list[str], k: int, method: str) -> list[Ranked]:
        """(row, score) lists, best first (scores non-increasing), at most ``k`` long, for one method."""
        if method == "bm25":
            return self.bm25.search(queries, k)
        if method == "dense":
            dense = self._need_dense("search dense")
            if dense.size == 0:
                return [[] for _ in queries]
            return dense.search_vectors(self.embedder.embed(list(queries), kind="query"), k)
        if method == "hybrid":
            self._need_dense("search hybrid")
            depth = max(k, self.config.hybrid.depth)
            weights = self.config.hybrid.weights
            used = [m for m in ("bm25", "dense") if weights.get(m, 1.0) > 0]
            if not used:
                raise UserError("hybrid.weights gives no method a positive weight; set bm25 or dense > 0")
            runs = {m: self.rank(queries, depth, m) for m in used}
            return [r[:k] for r in fuse(runs, self.config.hybrid)]
        raise UserError(f"unknown retrieval method {method!r}; choose one of {', '.join(METHODS)}")

    def search(self, queries: list[str], k: int, threshold: float | None = None,
               method: str | None = None) -> list[list[Hit]]:
        """Top-k hits per query; with ``threshold``, only hits scoring above it (RAGShaper Eq. 4)."""
        if k < 0:
            raise UserError(f"k must be >= 0, got {k}")
        m = method or self.config.method
        with self._lock:
            ranked = self.rank(list(queries), k, m)
            rows = self._rows
            if rows is None or rows.store is not self.store or rows.generation != self.store.generation:
                rows = self._rows = PassageRows(self.store)
        hits = make_hits(ranked, rows.lookup(r for rs in ranked for r, _ in rs), m, self.name)
        if threshold is None:  # rank() lists are best first and at most k long: apply_threshold keeps them as they are
            return hits
        return [apply_threshold(h, k, threshold) for h in hits]

    # ---- access -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.store)

    def get(self, passage_id: str) -> Passage:
        p = self.store.by_id(passage_id)
        if p is None:
            raise UserError(f"no passage with id {passage_id!r} in KB {self.name!r}")
        return p

    def passages(self) -> Iterator[Passage]:
        """All passages in row order, streamed from disk."""
        return iter(self.store)

    def ids(self) -> Iterator[str]:
        """Passage ids in row order, streamed from disk."""
        return self.store.ids()

    def sample_titles(self, n: int, seed: int = 0) -> list[str]:
        return self.store.sample_titles(n, seed)

    def gold(self) -> dict[str, list[str]]:
        path = self.directory / "gold.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _open_store(d: Path) -> PassageStore:
    path = d / PASSAGES_FILE
    legacy = d / "passages.jsonl"
    if not path.exists() and legacy.exists():
        log.info("converting %s to %s (once)", legacy, path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        try:
            w = PassageStore(tmp, writable=True)
            w.append(read_jsonl(legacy, Passage))
            w.finish()
            w.close()
            os.replace(tmp, path)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"{d}: a KB of an earlier version (passages.jsonl) must be converted once, in place, "
                            f"and that failed ({exc}); make the directory writable or rebuild it with "
                            "`agentrag kb build`") from exc
        legacy.unlink()
    return PassageStore(path)


def _rebuild_bm25(d: Path, store: PassageStore, n: int, config: KBConfig) -> BM25Index:
    """Re-index all passages into ``bm25.new`` (streamed), then swap it for ``bm25``."""
    new = d / "bm25.new"
    shutil.rmtree(new, ignore_errors=True)
    BM25Index.build(new, store.texts(), n, stemmer=config.bm25.stemmer, stopwords=config.bm25.stopwords)
    shutil.rmtree(d / "bm25", ignore_errors=True)
    os.replace(new, d / "bm25")
    return BM25Index.load(d / "bm25", mmap=True)


def _ids_key(store: PassageStore) -> str:
    h = hashlib.sha1()
    for p in store:
        h.update(p.id.encode() + b"\n")
    return h.hexdigest()[:16]


def _check_unique(passages: list[Passage]) -> None:
    seen: set[str] = set()
    for p in passages:
        if p.id in seen:
            raise UserError(f"duplicate passage id {p.id!r}; passage ids must be unique within a KB")
        if not p.text.strip():
            raise UserError(f"passage {p.id!r} has an empty text")
        seen.add(p.id)


def _load_embedder(config: KBConfig) -> Embedder:
    from agentrag.kb.embedders import load_embedder

    e = config.embedder
    return load_embedder(e.model, backend=e.backend, batch_size=e.batch_size, max_seq_length=e.max_seq_length,
                         pooling=e.pooling, query_prefix=e.query_prefix, passage_prefix=e.passage_prefix)


def _new_dense(dim: int, config: KBConfig) -> DenseIndex:
    i = config.index
    return DenseIndex(dim, i.type, hnsw_m=i.hnsw_m, ef_search=i.ef_search, nlist=i.nlist, pq_m=i.pq_m,
                      nprobe=i.nprobe)


def _params(config: KBConfig, emb: Embedder | None, n: int, timings: dict[str, float]) -> dict[str, Any]:
    return {
        "format": "agentrag-kb", "format_version": KB_FORMAT_VERSION, "name": config.name,
        "versions": _versions(), "config": config.model_dump(mode="json"),
        "embedder": None if emb is None else {"name": getattr(emb, "name", type(emb).__name__),
                                              "backend": config.embedder.backend, "dim": int(emb.dim)},
        "index_type": config.index.type, "counts": {"passages": n},
        "build_seconds": {k: round(v, 2) for k, v in timings.items()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


__all__ = ["KnowledgeBase", "KBConfig", "EmbedderConfig", "IndexConfig", "BM25Config", "HybridConfig", "METHODS"]
