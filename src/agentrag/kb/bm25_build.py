"""Streaming BM25 build: a bm25s index written from the corpus in bounded chunks, resumable.

``bm25s.BM25.index`` needs every document's token ids in memory at once (Python lists: ~1 GB per
200,000 passages, measured), then builds the score matrix in RAM. Here the passages are read in
chunks of ``chunk_docs``:

1. **tokenize** each chunk with one growing :class:`bm25s.tokenization.Tokenizer` (the same ids
   as tokenizing everything at once) and write its (token, term frequency) pairs and document
   lengths to ``<work>/chunk_NNNNN.npz``, and the vocabulary entries it added to
   ``vocab_NNNNN.json``; ``progress.json`` then records the chunk as done. A killed build resumes
   after the last finished chunk (the vocabulary is rebuilt from the per-chunk additions).
2. **count**: document frequencies and the average length from the chunk files; idf with bm25s's
   own function, ``indptr`` = cumulative document frequencies.
3. **write** each chunk's scores (bm25s's term-frequency function, the same float32 values) into
   their columns of ``data.csc.index.npy`` / ``indices.csc.index.npy`` with ``os.pwrite`` at
   per-column cursors (columns are filled in document order, as a CSC matrix is). This stage
   is redone whole on a resume; it only reads the chunk files.

Memory: one chunk's token ids and arrays (~2 KB per passage of ~100 words, measured) plus the
vocabulary (the tokenizer's dicts, and 20 bytes per distinct token of counts and cursors), never
the corpus or the score matrix. The files are bm25s's own (``bm25s.BM25.load`` reads them), with
the same arrays as ``BM25().index(tokenizer.tokenize(all texts))``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from agentrag.errors import UserError

#: passages tokenized at once by default (~60 MB of arrays at ~100 words a passage)
CHUNK_DOCS = 20_000
_DICTS = ("word_to_stem", "stem_to_sid", "word_to_id")


def rechunk(batches: Iterable[list[str]], size: int) -> Iterator[list[str]]:
    """The texts of ``batches`` regrouped into lists of ``size`` (the last may be shorter)."""
    it = itertools.chain.from_iterable(batches)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def build_bm25_files(batches: Iterable[list[str]], n: int, directory: Path, tokenizer: Any, *,
                     chunk_docs: int = CHUNK_DOCS, key: str = "", stats: dict[str, int] | None = None) -> None:
    """Write the bm25s index of the ``n`` texts given in ``batches`` into ``directory``.

    ``tokenizer``: a fresh bm25s ``Tokenizer``; its vocabulary is filled here (and saved as
    ``vocab.tokenizer.json``). ``key`` identifies the texts: a rerun with the same ``n``, key and
    chunk size resumes from ``<directory>.work``; a different one starts over. ``stats`` (if
    given) receives ``chunks``, ``resumed_chunks`` and ``max_chunk_docs`` (the most texts held
    at once).
    """
    import bm25s
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    work = directory.with_name(directory.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    fingerprint = f"{n}:{chunk_docs}:{key}:{tokenizer.stopwords is not None}:{tokenizer.stemmer is not None}"
    state_path = work / "progress.json"
    done = 0
    if state_path.exists():
        state = json.loads(state_path.read_text())
        if state.get("fingerprint") == fingerprint:
            done = int(state["done_chunks"])
    if done:
        _restore_vocab(tokenizer, work, done)
    st = stats if stats is not None else {}
    st.update(chunks=(n + chunk_docs - 1) // chunk_docs, resumed_chunks=done, max_chunk_docs=0)
    seen = 0
    for c, texts in enumerate(rechunk(batches, chunk_docs)):
        seen += len(texts)
        if c < done:
            continue
        st["max_chunk_docs"] = max(st["max_chunk_docs"], len(texts))
        sizes = [len(getattr(tokenizer, d)) for d in _DICTS]
        ids = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
        lengths = np.fromiter((len(d) for d in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        del ids
        pairs, tf = np.unique((np.repeat(np.arange(len(texts), dtype=np.int64), lengths) << 32) | flat,
                              return_counts=True)
        del flat
        np.savez(work / "chunk.tmp.npz", tok=(pairs & 0xFFFFFFFF).astype(np.int32), tf=tf.astype(np.int32),
                 nuniq=np.bincount(pairs >> 32, minlength=len(texts)).astype(np.int32),
                 length=lengths.astype(np.int32))
        os.replace(work / "chunk.tmp.npz", work / f"chunk_{c:05d}.npz")
        added = {d: list(itertools.islice(getattr(tokenizer, d).items(), s, None)) for d, s in zip(_DICTS, sizes, strict=True)}
        (work / f"vocab_{c:05d}.json").write_text(json.dumps(added, ensure_ascii=False), encoding="utf-8")
        state_path.write_text(json.dumps({"fingerprint": fingerprint, "done_chunks": c + 1}))
    if seen != n:
        raise UserError(f"BM25 indexing read {seen} texts, expected {n}; the passage store is damaged")
    n_chunks = st["chunks"]

    # 2. document frequencies, lengths, idf (bm25s's defaults: the Lucene variant)
    ref = bm25s.BM25()
    df = np.zeros(0, dtype=np.int64)
    total_len = 0
    for c in range(n_chunks):
        with np.load(work / f"chunk_{c:05d}.npz") as z:
            counts = np.bincount(z["tok"])
            total_len += int(z["length"].astype(np.int64).sum())
        if len(counts) > len(df):
            df = np.concatenate([df, np.zeros(len(counts) - len(df), dtype=np.int64)])
        df[:len(counts)] += counts
    # bm25s adds an empty column: id 0 (the tokenizer's "") if unused, else one past the last id
    n_cols = len(df) + (1 if len(df) and df[0] > 0 else 0)
    df = np.concatenate([df, np.zeros(n_cols - len(df), dtype=np.int64)])
    idf_fn, tfc_fn = _select_idf_scorer(ref.idf_method), _select_tfc_scorer(ref.method)
    uniq_df, inverse = np.unique(df, return_inverse=True)
    idf_of = np.array([idf_fn(int(d), N=n) if d else 0.0 for d in uniq_df.tolist()], dtype=np.float32)
    idf = idf_of[inverse]
    avg_len = np.float64(total_len) / n  # = np.mean of the lengths (exact integer sum)
    indptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])

    # 3. scores into their columns
    directory.mkdir(parents=True, exist_ok=True)
    data_path, ind_path = directory / "data.csc.index.npy", directory / "indices.csc.index.npy"
    offsets = []
    for path, dtype in ((data_path, np.dtype(ref.dtype)), (ind_path, np.dtype(ref.int_dtype))):
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(nnz,))  # header + sparse file
        offsets.append(int(mm.offset))
        del mm
    cursor = indptr[:-1].copy()
    first_doc = 0
    fd_data, fd_ind = os.open(data_path, os.O_WRONLY), os.open(ind_path, os.O_WRONLY)
    try:
        for c in range(n_chunks):
            with np.load(work / f"chunk_{c:05d}.npz") as z:
                tok, tf, nuniq, length = z["tok"], z["tf"], z["nuniq"], z["length"]
            local = np.repeat(np.arange(len(nuniq), dtype=np.int64), nuniq)
            tfc = tfc_fn(tf_array=tf.astype(np.float32), l_d=length.astype(np.int64)[local], l_avg=avg_len,
                         k1=ref.k1, b=ref.b, delta=ref.delta)
            scores = (idf[tok] * tfc).astype(ref.dtype)
            order = np.argsort(tok, kind="stable")  # by column; documents stay ascending inside
            tok_s, scores_s = tok[order], scores[order]
            docs_s = (local[order] + first_doc).astype(ref.int_dtype)
            cut = np.flatnonzero(np.diff(tok_s)) + 1
            starts = np.concatenate([[0], cut]).astype(np.int64)
            ends = np.concatenate([cut, [len(tok_s)]]).astype(np.int64)
            cols = tok_s[starts]
            at = cursor[cols]
            dview, iview = memoryview(scores_s.tobytes()), memoryview(docs_s.tobytes())
            dsz, isz = scores_s.itemsize, docs_s.itemsize
            for a, b, p in zip(starts.tolist(), ends.tolist(), at.tolist(), strict=True):
                os.pwrite(fd_data, dview[a * dsz:b * dsz], offsets[0] + p * dsz)
                os.pwrite(fd_ind, iview[a * isz:b * isz], offsets[1] + p * isz)
            cursor[cols] += ends - starts
            first_doc += len(nuniq)
    finally:
        os.close(fd_data)
        os.close(fd_ind)
    if not np.array_equal(cursor, indptr[1:]):
        raise UserError(f"{directory}: the BM25 chunk files do not add up; delete {work} and rebuild")
    np.save(directory / "indptr.csc.index.npy", indptr)
    (directory / "vocab.index.json").write_text(json.dumps({str(i): i for i in range(n_cols)}), encoding="utf-8")
    params = {"k1": ref.k1, "b": ref.b, "delta": ref.delta, "method": ref.method, "idf_method": ref.idf_method,
              "dtype": ref.dtype, "int_dtype": ref.int_dtype, "num_docs": n, "version": bm25s.__version__,
              "backend": ref.backend}
    (directory / "params.index.json").write_text(json.dumps(params, indent=4))
    tokenizer.save_vocab(str(directory))
    shutil.rmtree(work, ignore_errors=True)


def _restore_vocab(tokenizer: Any, work: Path, done: int) -> None:
    """The tokenizer's dicts as they were after chunk ``done - 1`` (entries are only ever appended)."""
    dicts: dict[str, dict[str, Any]] = {d: {} for d in _DICTS}
    for c in range(done):
        added = json.loads((work / f"vocab_{c:05d}.json").read_text(encoding="utf-8"))
        for d in _DICTS:
            dicts[d].update((k, v) for k, v in added[d])
    for d in _DICTS:
        setattr(tokenizer, d, dicts[d])


__all__ = ["build_bm25_files", "rechunk", "CHUNK_DOCS"]
