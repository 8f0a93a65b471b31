"""Scale benchmark: build and load a BM25 + IVF-PQ KB of N passages; peak RSS, time, disk,
queries/s, and the numbers projected linearly to wiki-18 (21M passages).

Corpus: N FlashRAG-format passages generated deterministically by
``agentrag.testing.recombined_corpus`` from the two shared corpora (8,009 real passages): each
passage is ~100 words of real sentences drawn at random (seeded) from the pool, titled with a
real title plus a number (about 7 passages per title, as in wiki-18).

Dense part: **random unit vectors** (dim 768 like e5-base, seeded by text) stand in for the
embedder, so the index and memory numbers are real while no model runs (embedding 21M passages
is a GPU job; see docs/kb.md). IVF-PQ: nlist = min(4*sqrt(N), N/39), 48 sub-quantizers of 8 bits.
Each stage runs in its own process and its peak RSS is that process's ``ru_maxrss``. At least
three sizes are measured; the projection fits RSS = a + b*N through the largest two, and the
linearity check prints what that line predicts at the smaller sizes beside what they measured
(and the MB per 100,000 passages of each step); times are scaled in proportion to the largest
size, with seconds per 100,000 passages at every size as their check. The benchmark's own
memory is kept out of the product's stages and printed on its own: a process that imports the
same libraries and loads nothing (the interpreter, numpy, bm25s, numba, faiss: a fixed term,
not per passage), and bm25s's own retrieval on the same index files, which runs in a process of
its own (its vocabulary dicts and score arrays would otherwise count in the load stage's peak).
Dense search against raw FAISS on the same index, and the memory of an imported IVF-PQ index at
larger sizes: ``benchmarks/kb_scale_dense.py`` (same corpus, same projection and linearity check).
The anchor is FlashRAG's way of opening the corpus: ``datasets.load_dataset("json", data_files=corpus)``.

    nice -n 15 PYTHONPATH=src .venv/bin/python benchmarks/kb_scale.py --sizes 200000,500000,1000000 --no-anchor

Measured: peak RSS of each stage (build with IVF-PQ, build of BM25 alone, load + queries), and
queries/s one query per call and 32 per call for BM25, dense and hybrid, with bm25s's own
``retrieve`` on the same index files beside ours (its numpy and numba backends, numba also
multi-threaded); ours with its default backend (numba, installed with the kb extra) and with numpy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from _shared import DATA

WIKI18 = 21_015_324
SOURCES = [DATA / "corpora" / "2wiki_passages_6119.jsonl", DATA / "corpora" / "musique_train_passages_1890.jsonl"]

PRELUDE = textwrap.dedent("""
    import hashlib, json, sys, time, resource
    import numpy as np
    class RandomEmbedder:
        name, dim = "random-unit-768", 768
        def embed(self, texts, kind="query"):
            seed = int.from_bytes(hashlib.blake2b("\\x00".join(texts).encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal((len(texts), self.dim), dtype=np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)
    def rss_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    def now_rss_mb(field="VmRSS"):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1]) / 1024
""")

BUILD = PRELUDE + textwrap.dedent("""
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import read_corpus
    corpus, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    nlist = min(int(4 * n ** 0.5), n // 39)
    cfg = KBConfig(index={"type": "ivfpq", "nlist": nlist, "pq_m": 48, "nprobe": 16})
    t0 = time.perf_counter()
    kb = KnowledgeBase.build(read_corpus(corpus), out, cfg, embedder=RandomEmbedder(), progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0, "stages": kb.params["build_seconds"]}))
""")

BUILD_BM25 = PRELUDE + textwrap.dedent("""
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import read_corpus
    t0 = time.perf_counter()
    kb = KnowledgeBase.build(read_corpus(sys.argv[1]), sys.argv[2], KBConfig(method="bm25"), progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0}))
""")

LOAD = PRELUDE + textwrap.dedent("""
    import os, random
    from agentrag.kb import KnowledgeBase
    out, nq, batch, methods = sys.argv[1], int(sys.argv[2]), 32, sys.argv[3].split(",")
    t0 = time.perf_counter()
    kb = KnowledgeBase.load(out, embedder=RandomEmbedder())
    res = {"load_seconds": time.perf_counter() - t0, "rss_after_load_mb": now_rss_mb(), "passages": len(kb),
           "anon_after_load_mb": now_rss_mb("RssAnon")}
    titles = kb.sample_titles(nq, seed=0)
    queries = [t.rsplit(" ", 1)[0] + " " + kb.get(str(random.Random(i).randrange(len(kb)))).text[:60]
               for i, t in enumerate(titles)]
    blocks = [queries[i:i + batch] for i in range(0, len(queries), batch)]
    if "bm25" in methods:  # first BM25 query of the process: numba loads (or, once per machine, compiles) its loop
        t0 = time.perf_counter()
        kb.search(queries[:1], 10, method="bm25")
        res["bm25_first_query_seconds"], res["bm25_backend"] = time.perf_counter() - t0, kb.bm25.backend

    def rate(name, fn, per_call, rounds=3):
        fn(queries[:4])  # warm-up (numba: compile)
        best_w = best_c = float("inf")
        for _ in range(rounds):  # best of 3: the machine may be shared
            w, c = time.perf_counter(), time.process_time()
            for item in (queries if per_call else blocks):
                fn([item] if per_call else item)
            best_w, best_c = min(best_w, time.perf_counter() - w), min(best_c, time.process_time() - c)
        res[name + "_qps"], res[name + "_cpu_qps"] = len(queries) / best_w, len(queries) / best_c

    # hits looked at (kb.search builds them on the first look): what a caller that reads them pays
    for method in methods:
        rate(method, lambda b, m=method: kb.search(b, 10, method=m)[-1], True)
        rate(method + "_batch", lambda b, m=method: kb.search(b, 10, method=m)[-1], False)
    if "bm25" in methods and kb.bm25.backend == "numba":  # our numpy path too (BM25Config.backend: numpy)
        kb.bm25.backend = "numpy"
        rate("bm25_numpy", lambda b: kb.search(b, 10, method="bm25")[-1], True)
        rate("bm25_numpy_batch", lambda b: kb.search(b, 10, method="bm25")[-1], False)
        kb.bm25.backend = "numba"
    res["rss_after_queries_mb"] = now_rss_mb()
    res["anon_after_queries_mb"] = now_rss_mb("RssAnon")  # RSS minus file pages (mmap'd indexes, reclaimable)
    print(json.dumps(res))
""")

#: the process every stage runs in, with the same imports, and nothing loaded: the benchmark's and
#: the libraries' fixed memory
BASELINE = PRELUDE + textwrap.dedent("""
    import faiss, bm25s
    from agentrag.kb import KnowledgeBase
    from agentrag.kb.ingest import read_corpus
    try:
        import numba  # noqa: F401
    except ImportError:
        pass
    print(json.dumps({"rss_mb": now_rss_mb(), "anon_mb": now_rss_mb("RssAnon")}))
""")

#: bm25s on its own, on the same index files, in its own process: loaded as its docs show, queries
#: made and tokenized as the load stage's (the KB's tokenizer)
RAW_BM25S = PRELUDE + textwrap.dedent("""
    import os, random
    import bm25s
    from agentrag.kb import KnowledgeBase
    out, nq, batch = sys.argv[1], int(sys.argv[2]), 32
    kb = KnowledgeBase.load(out, embedder=RandomEmbedder())
    titles = kb.sample_titles(nq, seed=0)
    queries = [t.rsplit(" ", 1)[0] + " " + kb.get(str(random.Random(i).randrange(len(kb)))).text[:60]
               for i, t in enumerate(titles)]
    blocks = [queries[i:i + batch] for i in range(0, len(queries), batch)]
    tok = kb.bm25.tokenizer
    res = {}

    def rate(name, fn, per_call, rounds=3):
        fn(queries[:4])  # warm-up (numba: compile)
        best_w = best_c = float("inf")
        for _ in range(rounds):
            w, c = time.perf_counter(), time.process_time()
            for item in (queries if per_call else blocks):
                fn([item] if per_call else item)
            best_w, best_c = min(best_w, time.perf_counter() - w), min(best_c, time.process_time() - c)
        res[name + "_qps"], res[name + "_cpu_qps"] = len(queries) / best_w, len(queries) / best_c

    backends = ["numpy"]
    try:
        import numba  # noqa: F401
        backends.append("numba")
    except ImportError:
        pass
    for backend in backends:
        raw = bm25s.BM25.load(os.path.join(out, "bm25"), load_corpus=False, mmap=True, backend=backend)
        def run(b, raw=raw):
            raw.retrieve(tok.tokenize(b, update_vocab=False, return_as="ids", show_progress=False), k=10,
                         show_progress=False, n_threads=0 if backend == "numpy" else 1)
        rate("bm25s_" + backend, run, True)
        rate("bm25s_" + backend + "_batch", run, False)
        if backend == "numba" and (os.cpu_count() or 1) > 1:  # its multi-threaded retrieval (wall clock counts)
            rate("bm25s_numba_mt_batch", lambda b, raw=raw: raw.retrieve(
                tok.tokenize(b, update_vocab=False, return_as="ids", show_progress=False), k=10,
                show_progress=False, n_threads=os.cpu_count()), False)
    print(json.dumps(res))
""")

ANCHOR = PRELUDE + textwrap.dedent("""
    import datasets
    corpus, cache = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    ds = datasets.load_dataset("json", data_files=corpus, split="train", cache_dir=cache)
    print(json.dumps({"seconds": time.perf_counter() - t0, "rows": len(ds), "rss_after_load_mb": now_rss_mb()}))
""")


def peak(code: str, *args: str) -> dict:
    """Run a stage and add its peak RSS (``ru_maxrss`` of the child process)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_DATASETS_OFFLINE": "1"}
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True)
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    if status != 0:
        raise SystemExit(f"stage failed:\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    res["peak_rss_mb"] = ru.ru_maxrss / 1024
    return res


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def measure(n: int, work: Path, queries: int, anchor: bool, bm25_only: bool = False) -> dict:
    from agentrag.testing import recombined_corpus

    corpus = work / f"corpus_{n}.jsonl"
    if not corpus.exists():
        tmp = corpus.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in recombined_corpus(n, [str(s) for s in SOURCES]):
                fh.write(json.dumps(rec) + "\n")
        tmp.rename(corpus)
    kb = work / f"kb_{n}"
    shutil.rmtree(kb, ignore_errors=True)
    res: dict = {"passages": n, "corpus_mb": corpus.stat().st_size / 2**20}
    bm = work / f"kb_bm25_{n}"
    shutil.rmtree(bm, ignore_errors=True)
    res["build"] = {} if bm25_only else peak(BUILD, str(corpus), str(kb), str(n))
    res["build"]["bm25_only_peak"] = peak(BUILD_BM25, str(corpus), str(bm))["peak_rss_mb"]
    if bm25_only:
        kb = bm
    else:
        shutil.rmtree(bm, ignore_errors=True)
    res["vocab"] = len(json.loads((kb / "bm25" / "vocab.index.json").read_text()))
    res["disk_mb"] = {p.name: round(du_mb(p) if p.is_dir() else p.stat().st_size / 2**20, 1) for p in kb.iterdir()}
    res["load"] = peak(LOAD, str(kb), str(queries), "bm25" if bm25_only else "bm25,dense,hybrid")
    raw = peak(RAW_BM25S, str(kb), str(queries))
    res["raw_bm25s_peak_rss_mb"] = raw.pop("peak_rss_mb")
    res["load"].update(raw)
    if anchor:
        cache = work / f"hf_cache_{n}"
        shutil.rmtree(cache, ignore_errors=True)
        res["anchor_hf_datasets"] = peak(ANCHOR, str(corpus), str(cache))
        shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(res), flush=True)
    return res


def get(r: dict, key: tuple[str, ...]) -> float:
    v: object = r
    for k in key:
        v = v[k]  # type: ignore[index]
    return float(v)  # type: ignore[arg-type]


def line(a: dict, b: dict, key: tuple[str, ...]) -> tuple[float, float]:
    """Intercept and slope (per passage) of the line through two measured sizes."""
    slope = (get(b, key) - get(a, key)) / (b["passages"] - a["passages"])
    return get(b, key) - slope * b["passages"], slope


def project(small: dict, big: dict, key: tuple[str, ...], n: int = WIKI18) -> float:
    """``key`` at ``n`` passages: memory on the line through ``small`` and ``big`` (a falling line
    is taken as flat), times in proportion to ``big``'s (two runs on a shared CPU are too noisy
    to fit an intercept)."""
    if "seconds" in key[-1]:
        return get(big, key) * n / big["passages"]
    a, b = line(small, big, key)
    return get(big, key) + max(0.0, b) * (n - big["passages"])


def linearity(runs: list[dict], key: tuple[str, ...]) -> str:
    """What the projection's line (through the largest two sizes) predicts at each smaller size,
    beside what that size measured, and the slope of every step (MB or s per 100,000 passages)."""
    small, big = runs[-2], runs[-1]
    parts = []
    for r in runs[:-2]:
        pred = project(small, big, key, r["passages"])
        dev = (get(r, key) - pred) / pred * 100 if pred else float("nan")
        parts.append(f"{r['passages']:,}: line {pred:,.0f}, measured {get(r, key):,.0f} ({dev:+.0f}%)")
    steps = [f"{(get(b, key) - get(a, key)) / (b['passages'] - a['passages']) * 1e5:,.1f}"
             for a, b in zip(runs, runs[1:], strict=False)]
    if "seconds" in key[-1]:
        steps = [f"{get(r, key) / r['passages'] * 1e5:,.1f}" for r in runs]
        return "; ".join(parts) + f"; s per 100k passages at each size: {' / '.join(steps)}"
    return "; ".join(parts) + f"; MB per 100k passages, step by step: {' / '.join(steps)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20000,100000,200000",
                    help="passages per measured KB, comma-separated, at least three; the projection goes "
                         "through the largest two")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/agentrag_kb_scale"))
    ap.add_argument("--no-anchor", action="store_true", help="skip the HF datasets load")
    ap.add_argument("--bm25-only", action="store_true", help="build and search BM25 only (no dense index)")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip()})
    if len(sizes) < 3:
        ap.error(f"--sizes needs at least three distinct sizes (a line through two cannot be checked), got {sizes}")
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    base = peak(BASELINE)
    runs = [measure(n, args.work, args.queries, not args.no_anchor, args.bm25_only) for n in sizes]
    small, big = runs[-2], runs[-1]
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n## {', '.join(f'{n:,}' for n in sizes)} passages (projection to wiki-18, {WIKI18:,}: linear through "
          f"{small['passages']:,} and {big['passages']:,})\n")
    raw_peaks = ", ".join(f"{r['raw_bm25s_peak_rss_mb']:,.0f}" for r in runs)
    print(f"The benchmark's own memory, not in the rows below: a process with the same imports and nothing loaded "
          f"peaks at {base['peak_rss_mb']:,.0f} MB (anonymous {base['anon_mb']:,.0f} MB) at every size (a fixed term: "
          f"the line's intercept holds it, its slope does not); bm25s's own retrieval ran in a process of its own "
          f"(peak {raw_peaks} MB).\n")
    from agentrag.kb.bm25_build import CHUNK_DOCS

    if small["passages"] < max(CHUNK_DOCS * 5, 65_536):
        print(f"NOTE: the projection goes through {small['passages']:,} and {big['passages']:,} passages, below the "
              f"build's working sets (BM25 chunks of {CHUNK_DOCS:,} passages; an IVF training sample of every vector "
              f"up to 65,536): there the build's memory grows with N until they fill and stops growing after, so the "
              f"line overstates 21M; project from sizes of 100,000 and more.\n")
    print("| quantity | " + " | ".join(f"{n:,}" for n in sizes) + " | projected to 21M | linearity check |")
    print("|---|" + "---|" * len(sizes) + "---|---|")
    rows = [("build peak RSS (MB)", ("build", "peak_rss_mb")), ("build seconds", ("build", "seconds")),
            ("load peak RSS incl. our queries (MB)", ("load", "peak_rss_mb")),
            ("build peak RSS, --method bm25 only (MB)", ("build", "bm25_only_peak")),
            ("RSS after load (MB)", ("load", "rss_after_load_mb")),
            ("anonymous RSS after load (MB)", ("load", "anon_after_load_mb")),
            ("anonymous RSS after the queries (MB)", ("load", "anon_after_queries_mb")),
            ("load seconds", ("load", "load_seconds"))]
    if not args.no_anchor:
        rows += [("anchor: HF datasets load, peak RSS (MB)", ("anchor_hf_datasets", "peak_rss_mb")),
                 ("anchor: HF datasets load seconds", ("anchor_hf_datasets", "seconds"))]
    for label, key in rows:
        if args.bm25_only and key[0] == "build" and key[1] != "bm25_only_peak":
            continue
        print(f"| {label} | " + " | ".join(f"{get(r, key):,.1f}" for r in runs) +
              f" | {project(small, big, key):,.0f} | {linearity(runs, key)} |")
    disk = sum(big["disk_mb"].values())
    print(f"| disk (MB): {big['disk_mb']} | " + " | ".join(f"{sum(r['disk_mb'].values()):,.0f}" for r in runs) +
          f" | {disk * WIKI18 / big['passages']:,.0f} | |")
    counts = " / ".join(f"{r['passages']:,}" for r in runs)
    vocabs = " / ".join(f"{r['vocab']:,}" for r in runs)
    print(f"\nBM25 vocabulary (distinct stems) at {counts} passages: {vocabs}. The recombined corpus reuses the sentences of 8,009 real "
          "passages, so its vocabulary saturates; a real corpus's keeps growing (Heaps' law), and the build "
          "holds the tokenizer's dicts: see docs/kb.md for that term of the bound.")
    print("\nqueries/s, k=10 (wall clock, this machine as loaded; CPU-time rates in parentheses). "
          "1/call: one query per search call; batched: 32 queries per call. bm25s: its own retrieve on the same "
          "index files (loaded with mmap=True, in its own process), queries tokenized by the KB's tokenizer, ids and "
          "scores only; ours with every hit looked at (passages read, Hit objects built).\n")
    print("| passages | method | 1/call | batched | bm25s numpy 1/call | bm25s numpy batched | ours/bm25s (CPU, batched) |"
          "\n|---|---|---|---|---|---|---|")
    for r in runs:
        ld = r["load"]
        for m in ("bm25",) if args.bm25_only else ("bm25", "dense", "hybrid"):
            raw = ((f"{ld['bm25s_numpy_qps']:,.0f} ({ld['bm25s_numpy_cpu_qps']:,.0f})",
                    f"{ld['bm25s_numpy_batch_qps']:,.0f} ({ld['bm25s_numpy_batch_cpu_qps']:,.0f})",
                    f"{ld['bm25_batch_cpu_qps'] / ld['bm25s_numpy_batch_cpu_qps']:.2f}") if m == "bm25" else ("", "", ""))
            label = f"bm25 ({ld.get('bm25_backend', 'numpy')} backend)" if m == "bm25" else m
            print(f"| {r['passages']:,} | {label} | {ld[m + '_qps']:,.0f} ({ld[m + '_cpu_qps']:,.0f}) | "
                  f"{ld[m + '_batch_qps']:,.0f} ({ld[m + '_batch_cpu_qps']:,.0f}) | {' | '.join(raw)} |")
        if "bm25_numpy_qps" in ld:
            print(f"| {r['passages']:,} | bm25, numpy backend | {ld['bm25_numpy_qps']:,.0f} ({ld['bm25_numpy_cpu_qps']:,.0f})"
                  f" | {ld['bm25_numpy_batch_qps']:,.0f} ({ld['bm25_numpy_batch_cpu_qps']:,.0f}) | | | "
                  f"{ld['bm25_numpy_batch_cpu_qps'] / ld['bm25s_numpy_batch_cpu_qps']:.2f} |")
        if "bm25s_numba_qps" in ld:
            print(f"| {r['passages']:,} | bm25s numba | {ld['bm25s_numba_qps']:,.0f} ({ld['bm25s_numba_cpu_qps']:,.0f}) | "
                  f"{ld['bm25s_numba_batch_qps']:,.0f} ({ld['bm25s_numba_batch_cpu_qps']:,.0f}) | | | "
                  f"ours (numba) / bm25s numba: 1/call {ld['bm25_cpu_qps'] / ld['bm25s_numba_cpu_qps']:.2f}, "
                  f"batched {ld['bm25_batch_cpu_qps'] / ld['bm25s_numba_batch_cpu_qps']:.2f} |")
        if "bm25s_numba_mt_batch_qps" in ld:
            print(f"| {r['passages']:,} | bm25s numba n_threads={os.cpu_count()} | | "
                  f"{ld['bm25s_numba_mt_batch_qps']:,.0f} | | | ours/bm25s wall, batched "
                  f"{ld['bm25_batch_qps'] / ld['bm25s_numba_mt_batch_qps']:.2f} |")
        if "bm25_first_query_seconds" in ld:
            print(f"| {r['passages']:,} | first BM25 query ({ld['bm25_backend']}) | "
                  f"{ld['bm25_first_query_seconds']:.2f} s | | | | |")
    print(f"\nprojection to {WIKI18:,} passages: queries/s fall about in proportion to the passages (each query "
          "scores every passage holding one of its terms, and selects from all of them): x "
          f"{big['passages'] / WIKI18:.4f} of the {big['passages']:,}-passage rates: BM25 1/call "
          f"~{big['load']['bm25_qps'] * big['passages'] / WIKI18:,.1f}/s, batched "
          f"~{big['load']['bm25_batch_qps'] * big['passages'] / WIKI18:,.1f}/s per core")

if __name__ == "__main__":
    main()
