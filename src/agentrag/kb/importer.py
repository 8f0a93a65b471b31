"""Make a KB from the field's prebuilt artifacts (no re-embedding): a FlashRAG/Search-R1 corpus
(``{"id", "contents"}`` jsonl) with the FAISS index built over it (row i = line i, e.g. wiki-18's
``e5_Flat.index``) and/or a bm25s index directory.

The embedder that made the FAISS index must be named, with its pooling and prefixes where the
model's defaults differ from how the index was built (FlashRAG: e5 mean pooling, ``"query: "``;
bge cls pooling with its instruction); queries are embedded the same way at search time.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.kb.config import KBConfig
from agentrag.kb.indexes import BM25Index
from agentrag.kb.ingest import read_corpus
from agentrag.kb.passages import FILE as PASSAGES_FILE
from agentrag.kb.passages import PassageStore
from agentrag.kb.store import KnowledgeBase, _params, _write_json

log = logging.getLogger(__name__)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _faiss_type(path: Path) -> tuple[str, int, int]:
    """(our index type, dim, ntotal) of a FAISS index file, read memory-mapped."""
    import faiss

    try:
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError as exc:
        raise UserError(f"{path}: not a FAISS index ({str(exc).splitlines()[0]})") from exc
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise UserError(f"{path}: the index uses metric {index.metric_type}, not inner product; agentrag searches "
                        "normalised vectors by inner product (FlashRAG's e5/bge indexes do)")
    kind = "flat"
    try:
        faiss.extract_index_ivf(index)
        kind = "ivfpq"
    except RuntimeError:
        if "HNSW" in type(faiss.downcast_index(index)).__name__:
            kind = "hnsw"
    return kind, int(index.d), int(index.ntotal)


def import_kb(corpus: str | os.PathLike[str], out_dir: str | os.PathLike[str], config: KBConfig | None = None, *,
              faiss_index: str | os.PathLike[str] | None = None, bm25_dir: str | os.PathLike[str] | None = None,
              overwrite: bool = False) -> KnowledgeBase:
    """Build a KB directory from a corpus and prebuilt indexes (BM25 is indexed here if not given)."""
    config = config or KBConfig()
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise UserError(f"{out} already exists; pass another output directory (the CLI's --out), or overwrite=True (--overwrite) to replace it")
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    store = PassageStore(partial / PASSAGES_FILE, writable=True)
    store.append(read_corpus(corpus, "auto"))  # no dedupe: row i must stay line i of the corpus
    store.finish()
    n = len(store)
    timings["ingest"] = time.perf_counter() - t0
    if not n:
        raise UserError(f"{corpus}: no passages")
    t0 = time.perf_counter()
    if bm25_dir is not None:
        bm = BM25Index.adopt(Path(bm25_dir), partial / "bm25", stemmer=config.bm25.stemmer,
                             stopwords=config.bm25.stopwords)
        if bm.size != n:
            raise UserError(f"{bm25_dir}: the BM25 index holds {bm.size} documents but {corpus} has {n} passages")
    else:
        bm = BM25Index.build(partial / "bm25", store.texts(), n, stemmer=config.bm25.stemmer,
                             stopwords=config.bm25.stopwords)  # streamed: bounded memory (kb/bm25_build)
    timings["bm25"] = time.perf_counter() - t0
    emb_params: Any = None
    if faiss_index is not None:
        if config.embedder.model is None:
            raise UserError("--faiss needs --embedder NAME: the model that embedded the index's passages")
        kind, dim, ntotal = _faiss_type(Path(faiss_index))
        if ntotal != n:
            raise UserError(f"{faiss_index}: the index holds {ntotal} vectors but {corpus} has {n} passages "
                            "(row i of the index must be line i of the corpus)")
        config = config.model_copy(update={"index": config.index.model_copy(update={"type": kind})})
        _link_or_copy(Path(faiss_index), partial / "dense.faiss")
        emb_params = {"name": config.embedder.model, "backend": config.embedder.backend, "dim": dim}
    elif config.method != "bm25":
        config = config.model_copy(update={"method": "bm25"})
    params = _params(config, None, n, timings)
    params["embedder"] = emb_params
    params["imported"] = {"corpus": str(corpus), "faiss": str(faiss_index) if faiss_index else None,
                          "bm25": str(bm25_dir) if bm25_dir else None}
    _write_json(partial / "params.json", params)
    store.close()
    if out.exists():
        shutil.rmtree(out)
    os.replace(partial, out)
    log.info("imported KB %s: %d passages", out, n)
    return KnowledgeBase._open(out)


__all__ = ["import_kb"]
