"""Retrieval benchmark: our KB search vs calling bm25s / FAISS directly, and our fast embedding
path (ONNX Runtime int8) vs naive sentence-transformers fp32, with recall@10 of each.

Corpus: the context paragraphs of the first N questions of HotpotQA dev (shared data); queries:
those questions. Every ratio compares two measurements taken in this process on the same data.

Then the retrieval server (``agentrag kb serve``, a subprocess) against the same KB searched in
this process, BM25 at concurrency 16, single queries and 32-query batches, with 1 and 2 server
worker processes; and a small request's latency alone vs while max-size requests run.

    .venv/bin/python benchmarks/retrieval.py [--questions 40] [--repeat 20] [--http-only] [--skip-http]
    .venv/bin/python benchmarks/retrieval.py --bm25-only [--questions 200]   # BM25 vs bm25s alone, no model
    .venv/bin/python benchmarks/retrieval.py --bm25-only --passages 200000 [--work DIR]   # a recombined KB of N

``--passages N`` builds (once; kept under ``--work``) a BM25 KB of N passages made by
``agentrag.testing.recombined_corpus`` from the shared corpora (as benchmarks/kb_scale.py), queried
with the 200 HotpotQA dev questions.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _shared import DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from agentrag.kb import KBConfig, KnowledgeBase  # noqa: E402
from agentrag.kb.embedders import OnnxInt8Embedder, embedded_model_path  # noqa: E402
from agentrag.kb.ingest import pooled_passages, questions  # noqa: E402


def recall_at(rows: list[list[int]], ids: list[str], golds: list[list[str]], k: int) -> tuple[float, float]:
    all_hit = frac = 0.0
    for r, g in zip(rows, golds, strict=True):
        top = {ids[i] for i in r[:k]}
        found = sum(x in top for x in g)
        all_hit += found == len(g)
        frac += found / len(g)
    return all_hit / len(golds), frac / len(golds)


class Cached:
    """Serves precomputed passage vectors (so the KB build does not embed a third time)."""

    def __init__(self, inner: OnnxInt8Embedder, table: dict[str, np.ndarray]) -> None:
        self.inner, self.table, self.dim, self.name = inner, table, inner.dim, inner.name

    def embed(self, texts: list[str], kind: str = "query") -> np.ndarray:
        if kind == "passage":
            return np.stack([self.table[t] for t in texts])
        return self.inner.embed(texts, kind="query")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=10, help="query-set repetitions for search timing")
    ap.add_argument("--kb", type=Path, default=None,
                    help="measure search throughput on this existing KB (e.g. runs/kb_full) instead of the small one")
    ap.add_argument("--passages", type=int, default=0,
                    help="with --bm25-only: a BM25 KB of this many recombined passages (built once under --work)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "agentrag-bench-retrieval",
                    help="where --passages keeps the KBs it builds")
    ap.add_argument("--skip-embedding", action="store_true", help="only the search-throughput part")
    ap.add_argument("--http-only", action="store_true", help="only the HTTP server part (BM25, no model)")
    ap.add_argument("--bm25-only", action="store_true",
                    help="only our BM25 search vs raw bm25s (a BM25 KB, no model, no server)")
    ap.add_argument("--skip-http", action="store_true", help="without the HTTP server part")
    ap.add_argument("--http-seconds", type=float, default=2.0, help="seconds per HTTP/in-process measurement")
    ap.add_argument("--workers", default="1,2", help="server worker processes to measure, comma-separated")
    ap.add_argument("--server-src", type=Path, default=None,
                    help="run the server from this src/ (e.g. an older checkout's) for a before/after comparison")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of each ours/raw pair")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="time search by this process's CPU time (default; robust on a shared machine) or wall time")
    args = ap.parse_args()
    global CLOCK, ROUNDS
    CLOCK, ROUNDS = args.clock, args.rounds

    src = DATA / "hotpotqa" / "dev_distractor_200.jsonl"
    items = list(questions(src))[: args.questions]
    tmp = Path(tempfile.mkdtemp())
    sub = tmp / "sub.jsonl"
    sub.write_text("".join(line for _, line in zip(range(args.questions), src.open(encoding="utf-8"), strict=False)))
    passages = list(pooled_passages([sub]))
    texts = [p.contents for p in passages]
    ids = [p.id for p in passages]
    qs = [q for _, q, _ in items]
    golds = [g for _, _, g in items]
    print(f"corpus: {len(passages)} passages from {len(items)} HotpotQA dev questions")
    if args.bm25_only:
        if args.passages:
            args.kb = recombined_kb(args.passages, args.work)
        kb = (KnowledgeBase.load(args.kb) if args.kb else
              KnowledgeBase.build(passages, tmp / "kb", KBConfig(method="bm25"), progress=False))
        if args.kb:
            qs = [q for _, q, _ in questions(src)]
        load = os.getloadavg()
        print(f"bm25 benchmark on {kb.directory} ({len(kb)} passages), {len(qs)} distinct queries x {args.repeat}; "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        bm25_vs_raw(kb, qs * args.repeat)
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return
    if args.http_only:
        kb = (KnowledgeBase.load(args.kb) if args.kb else
              KnowledgeBase.build(passages, tmp / "kb", KBConfig(method="bm25"), progress=False))
        run_http(args, kb, qs)
        return

    ours_emb = OnnxInt8Embedder()
    if not args.skip_embedding:
        fast = embedding_benchmark(texts, ids, qs, golds, ours_emb)
    elif args.kb is None:
        fast = ours_emb.embed(texts, kind="passage")
    else:
        fast = np.zeros((0, ours_emb.dim), dtype=np.float32)
    kb = search_benchmark(args, passages, texts, fast, qs, ours_emb, tmp)
    if not args.skip_http:
        run_http(args, kb, qs)


def recombined_kb(n: int, work: Path) -> Path:
    """A BM25 KB of ``n`` recombined passages under ``work`` (built unless a finished one is there)."""
    from _shared import DATA as data

    from agentrag.kb.ingest import read_corpus
    from agentrag.testing import recombined_corpus

    out = work / f"kb_bm25_{n}"
    if (out / "params.json").exists():
        return out
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus_{n}.jsonl"
    sources = [str(data / "corpora" / "2wiki_passages_6119.jsonl"),
               str(data / "corpora" / "musique_train_passages_1890.jsonl")]
    with corpus.open("w", encoding="utf-8") as fh:
        for rec in recombined_corpus(n, sources):
            fh.write(json.dumps(rec) + "\n")
    t0 = time.perf_counter()
    KnowledgeBase.build(read_corpus(corpus), out, KBConfig(method="bm25"), progress=False)
    print(f"built {out} ({n} passages) in {time.perf_counter() - t0:.0f} s")
    corpus.unlink()
    return out


def run_http(args: argparse.Namespace, kb: KnowledgeBase, qs: list[str]) -> None:
    from _retrieval_http import http_benchmark

    load = os.getloadavg()
    print(f"HTTP benchmark on {kb.directory} ({len(kb)} passages), {len(qs)} distinct queries; {os.cpu_count()} "
          f"CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    http_benchmark(kb.directory, lambda b, k: kb.search(b, k, method="bm25"), qs, seconds=args.http_seconds,
                   workers=[int(w) for w in args.workers.split(",") if w.strip()], server_src=args.server_src)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def embedding_benchmark(texts: list[str], ids: list[str], qs: list[str], golds: list[list[str]],
                        ours_emb: OnnxInt8Embedder) -> np.ndarray:
    """Naive sentence-transformers fp32 vs ours (ONNX Runtime int8): throughput and recall@10."""
    import faiss
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(embedded_model_path(), device="cpu")
    t0 = time.perf_counter()
    naive = st.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    t_naive = time.perf_counter() - t0
    ours_emb.embed(texts[:4], kind="passage")  # warm-up (session start)
    t0 = time.perf_counter()
    fast = ours_emb.embed(texts, kind="passage")
    t_fast = time.perf_counter() - t0
    res = {}
    for name, vecs, qvec in (("naive fp32", naive, st.encode(qs, normalize_embeddings=True)),
                             ("onnx int8", fast, ours_emb.embed(qs))):
        idx = faiss.IndexFlatIP(vecs.shape[1])
        idx.add(np.ascontiguousarray(vecs, dtype=np.float32))
        _, rows = idx.search(np.ascontiguousarray(qvec, dtype=np.float32), 10)
        res[name] = recall_at(rows.tolist(), ids, golds, 10)
    print(f"embedding  naive fp32 {len(texts) / t_naive:7.1f} psg/s  all@10 {res['naive fp32'][0]:.3f}  "
          f"psg@10 {res['naive fp32'][1]:.3f}")
    print(f"embedding  onnx int8  {len(texts) / t_fast:7.1f} psg/s  all@10 {res['onnx int8'][0]:.3f}  "
          f"psg@10 {res['onnx int8'][1]:.3f}")
    print(f"RATIO embedding ours/naive = {t_naive / t_fast:.2f}x  (recall@10 delta "
          f"{100 * (res['onnx int8'][1] - res['naive fp32'][1]):+.1f} points passage, "
          f"{100 * (res['onnx int8'][0] - res['naive fp32'][0]):+.1f} points all)")
    print(f"mean cosine(naive, int8) = {float((naive * fast).sum(1).mean()):.4f}")

    return fast


def search_benchmark(args: argparse.Namespace, passages: list, texts: list[str], fast: np.ndarray, qs: list[str],
                     ours_emb: OnnxInt8Embedder, tmp: Path) -> KnowledgeBase:
    """Our KB search vs bm25s / faiss called directly on the same index and queries."""
    if args.kb:
        kb = KnowledgeBase.load(args.kb, embedder=ours_emb)
        qs = [q for _, q, _ in questions(DATA / "hotpotqa" / "dev_distractor_200.jsonl")]
    else:
        table = dict(zip(texts, fast, strict=True))
        kb = KnowledgeBase.build(passages, tmp / "kb", KBConfig(), embedder=Cached(ours_emb, table), progress=False)
    print(f"search benchmark on {kb.directory} ({len(kb)} passages), {len(qs)} distinct queries")
    many = qs * args.repeat
    bm25_vs_raw(kb, many)
    dense_q = qs * max(1, args.repeat // 4)
    t_raw_dense, t_our_dense = best_of(lambda: kb.dense.index.search(ours_emb.embed(dense_q), 10),
                                       lambda: kb.search(dense_q, 10, method="dense"))
    print(f"dense  raw faiss+embed {len(dense_q) / t_raw_dense:6.0f} q/s  ours {len(dense_q) / t_our_dense:6.0f} q/s  "
          f"RATIO ours/raw = {t_raw_dense / t_our_dense:.2f}")
    qv = ours_emb.embed(dense_q)
    t_raw_idx, t_our_idx = best_of(lambda: kb.dense.index.search(qv, 10), lambda: kb.dense.search_vectors(qv, 10),
                                   inner=20)
    print(f"dense index only (pre-embedded queries, no Hit objects): RATIO ours/raw faiss = {t_raw_idx / t_our_idx:.2f}")
    return kb


def bm25_vs_raw(kb: KnowledgeBase, many: list[str]) -> None:
    """Our ``kb.search(method="bm25")`` vs bm25s's ``retrieve`` on the same index and queries,
    batched (all queries in one call) and one query per call, backend against backend: our numpy
    path vs bm25s numpy (``n_threads=0``), our numba path (the default where numba is installed) vs
    bm25s ``backend="numba"`` on a copy loaded with it; then bm25s's multi-threaded retrieval
    (``n_threads``, wall clock).

    What each side does. Raw bm25s: the index's own tokenizer (``tokenize(update_vocab=False)``:
    lower-case, split, stopwords, the Snowball stemmer) and ``retrieve(k=10)``, which returns row
    ids and scores. Ours: the same tokenization (``agentrag.kb.bm25_query``, identical ids) and
    the same scoring loop; ``kb.search`` returns a ``SearchResults`` holding the ranking, whose
    passages are read and ``Hit`` objects built when the hits are first looked at. So:

    - "as returned": ours as ``kb.search`` returns, vs raw ids and scores (the same work);
    - "every hit built": ours with every query's hits looked at (passages read, ten ``Hit``
      objects a query, then dropped with the result), vs raw ids and scores, which build nothing
      (work only ours does);
    - "vs raw with documents": the same, vs bm25s ``retrieve(corpus=...)`` returning each hit's
      document (``{"id", "title", "text"}`` dicts) from a list in memory, which is what a bm25s
      user who wants passages gets. Its corpus is held in memory at every size (bm25s's
      ``load_corpus=True``); ours is read from SQLite per search above the 32 MB cache bound
      (200,000 passages).

    Each pair is measured in alternating rounds; a RATIO is best against best, with the range of
    the rounds' own ratios beside it. The clock is this process's CPU time unless ``--clock wall``."""
    tok, bm = kb.bm25.tokenizer, kb.bm25.retriever
    default = kb.bm25.backend

    def raw(batch: list[str], **kw: object) -> None:
        bm.retrieve(tok.tokenize(batch, update_vocab=False, return_as="ids", show_progress=False), k=10,
                    show_progress=False, **kw)

    def per_query(fn):
        return lambda: [fn([q]) for q in many]

    ours = lambda b: kb.search(b, 10, method="bm25")  # noqa: E731
    built = lambda b: sum(map(len, kb.search(b, 10, method="bm25")))  # noqa: E731  (every query's hit list)
    kb.bm25.backend = "numpy"
    t_raw, t_ours = best_of(lambda: raw(many, n_threads=0), lambda: ours(many))
    print(f"bm25 batched  raw bm25s numpy {len(many) / t_raw:8.0f} q/s  ours numpy {len(many) / t_ours:8.0f} q/s  "
          f"RATIO ours/raw = {t_raw / t_ours:.2f} {spread()}")
    t_raw1, t_ours1 = best_of(per_query(lambda b: raw(b, n_threads=0)), per_query(ours))
    print(f"bm25 1/call   raw bm25s numpy {len(many) / t_raw1:8.0f} q/s  ours numpy {len(many) / t_ours1:8.0f} q/s  "
          f"RATIO ours/raw = {t_raw1 / t_ours1:.2f} {spread()}")
    kb.bm25.backend = default
    try:
        import bm25s
        import numba  # noqa: F401
    except ImportError:
        print("bm25 numba backend: numba is not installed (pip install 'agentrag[kb]' brings it); skipped")
        return
    kb.bm25.backend = "numba"
    built(many[:4])  # our numba loop: loaded from numba's cache (or compiled, once per machine); rows read
    nb = bm25s.BM25.load(str(kb.directory / "bm25"), load_corpus=False, mmap=True, backend="numba")
    q_ids = tok.tokenize(many, update_vocab=False, return_as="ids", show_progress=False)
    nb.retrieve(q_ids[:4], k=10, show_progress=False)  # compile
    corpus = [{"id": r[0], "title": r[1], "text": r[2]} for r in kb.store.all_raw_rows()]

    def raw_nb(batch: list[str], threads: int = 1, docs: list | None = None) -> None:
        nb.retrieve(tok.tokenize(batch, update_vocab=False, return_as="ids", show_progress=False), k=10,
                    show_progress=False, n_threads=threads, corpus=docs)

    def raw_docs(batch: list[str]) -> None:
        raw_nb(batch, docs=corpus)

    t_nb, t_ours = best_of(lambda: raw_nb(many), lambda: ours(many))
    print(f"bm25 batched  raw bm25s numba {len(many) / t_nb:8.0f} q/s  ours numba {len(many) / t_ours:8.0f} q/s  "
          f"RATIO ours/raw = {t_nb / t_ours:.2f} {spread()}  (as returned)")
    t_nb_b, t_built = best_of(lambda: raw_nb(many), lambda: built(many))
    print(f"   every hit built: ours numba {len(many) / t_built:8.0f} q/s  RATIO ours/raw = {t_nb_b / t_built:.2f} "
          f"{spread()}")
    t_docs, t_built_d = best_of(lambda: raw_docs(many), lambda: built(many))
    print(f"   vs raw with documents: raw {len(many) / t_docs:8.0f} q/s  ours {len(many) / t_built_d:8.0f} q/s  "
          f"RATIO ours/raw = {t_docs / t_built_d:.2f} {spread()}")
    us = 1e6 / len(many)
    t_tok = best_of(lambda: tok.tokenize(many, update_vocab=False, return_as="ids", show_progress=False),
                    lambda: None)[0]
    print(f"   per query: bm25s {t_nb * us:.1f} us (its tokenizer {t_tok * us:.1f}), {t_docs * us:.1f} us with "
          f"documents; ours {t_ours * us:.1f} us, {t_built * us:.1f} us with every hit built")
    t_nb1, t_ours1 = best_of(per_query(raw_nb), per_query(ours))
    print(f"bm25 1/call   raw bm25s numba {len(many) / t_nb1:8.0f} q/s  ours numba {len(many) / t_ours1:8.0f} q/s  "
          f"RATIO ours/raw = {t_nb1 / t_ours1:.2f} {spread()}  (as returned)")
    t_nb1_b, t_built1 = best_of(per_query(raw_nb), per_query(built))
    print(f"   every hit built: ours numba {len(many) / t_built1:8.0f} q/s  RATIO ours/raw = {t_nb1_b / t_built1:.2f} "
          f"{spread()}")
    t_docs1, t_built1_d = best_of(per_query(raw_docs), per_query(built))
    print(f"   vs raw with documents: raw {len(many) / t_docs1:8.0f} q/s  ours {len(many) / t_built1_d:8.0f} q/s  "
          f"RATIO ours/raw = {t_docs1 / t_built1_d:.2f} {spread()}")
    threads = os.cpu_count() or 1
    if threads > 1:  # threads: wall clock (CPU time adds up every thread's)
        global CLOCK
        clock, CLOCK = CLOCK, "wall"
        t_mt, t_ours = best_of(lambda: raw_nb(many, threads), lambda: ours(many))
        CLOCK = clock
        print(f"bm25 batched  raw bm25s numba n_threads={threads} {len(many) / t_mt:8.0f} q/s  ours numba "
              f"{len(many) / t_ours:8.0f} q/s  RATIO ours/raw = {t_mt / t_ours:.2f} {spread()}  (wall time)")
    kb.bm25.backend = default


#: process CPU time (``--clock cpu``, the default: other processes on a shared machine do not count)
#: or wall time
CLOCK = "cpu"


def _now() -> float:
    return time.process_time() if CLOCK == "cpu" else time.perf_counter()


#: rounds of each :func:`best_of` (``--rounds``)
ROUNDS = 5
#: raw/ours of each round of the last :func:`best_of`
LAST_RATIOS: list[float] = []


def best_of(raw, ours, *, rounds: int | None = None, inner: int = 1) -> tuple[float, float]:
    """Alternate the two measurements (which one goes first alternates too) and keep each one's
    best (the machine may be shared); each round's own ratio is kept in :data:`LAST_RATIOS`."""
    best_raw = best_ours = float("inf")
    LAST_RATIOS.clear()
    for i in range(rounds or ROUNDS):
        dts = {}
        for fn, which in ((raw, "raw"), (ours, "ours"))[:: 1 if i % 2 == 0 else -1]:
            t0 = _now()
            for _ in range(inner):
                fn()
            dts[which] = (_now() - t0) / inner
        best_raw, best_ours = min(best_raw, dts["raw"]), min(best_ours, dts["ours"])
        LAST_RATIOS.append(dts["raw"] / max(dts["ours"], 1e-12))
    return best_raw, best_ours


def spread() -> str:
    """The range and median of the last :func:`best_of`'s per-round ratios."""
    r = sorted(LAST_RATIOS)
    return f"(rounds {r[0]:.2f}-{r[-1]:.2f}, median {r[len(r) // 2]:.2f})" if r else ""

if __name__ == "__main__":
    main()
