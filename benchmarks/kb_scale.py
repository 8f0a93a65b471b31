"""Scale benchmark: build and load a BM25 + IVF-PQ KB of N passages; peak RSS, time, disk,
queries/s, and the numbers projected linearly to wiki-18 (21M passages).

Corpus: N FlashRAG-format passages generated deterministically by
``agentrag.testing.recombined_corpus`` from the two shared corpora (8,009 real passages): each
passage is ~100 words of real sentences drawn at random (seeded) from the pool, titled with a
real title plus a number (about 7 passages per title, as in wiki-18).

Dense part: **random unit vectors** (dim 768 like e5-base, seeded by text) stand in for the
embedder, so the index and memory numbers are real while no model runs (embedding 21M passages
is a GPU job; see docs/kb.md). IVF-PQ: nlist = min(4*sqrt(N), N/39), 48 sub-quantizers of 8 bits.
Each stage runs in its own process and its peak RSS is that process's ``ru_maxrss``; the
projection fits RSS = a + b*N through two scales (N and N/10); times are scaled in proportion. The anchor is FlashRAG's way of
opening the corpus: ``datasets.load_dataset("json", data_files=corpus)``.

    nice -n 15 PYTHONPATH=src .venv/bin/python benchmarks/kb_scale.py --passages 100000 --work /tmp/kb_scale
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
    from agentrag.kb import KnowledgeBase
    out, nq = sys.argv[1], int(sys.argv[2])
    t0 = time.perf_counter()
    kb = KnowledgeBase.load(out, embedder=RandomEmbedder())
    res = {"load_seconds": time.perf_counter() - t0, "rss_after_load_mb": now_rss_mb(), "passages": len(kb),
           "anon_after_load_mb": now_rss_mb("RssAnon")}
    import random
    titles = kb.sample_titles(nq, seed=0)
    queries = [t.rsplit(" ", 1)[0] + " " + kb.get(str(random.Random(i).randrange(len(kb)))).text[:60]
               for i, t in enumerate(titles)]
    for method in ("bm25", "dense", "hybrid"):
        kb.search(queries[:4], 10, method=method)
        t0 = time.perf_counter()
        for q in queries:
            kb.search([q], 10, method=method)
        res[f"{method}_qps"] = len(queries) / (time.perf_counter() - t0)
    res["rss_after_queries_mb"] = now_rss_mb()
    res["anon_after_queries_mb"] = now_rss_mb("RssAnon")  # RSS minus file pages (mmap'd indexes, reclaimable)
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


def measure(n: int, work: Path, queries: int, anchor: bool) -> dict:
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
    res["build"] = peak(BUILD, str(corpus), str(kb), str(n))
    res["build"]["bm25_only_peak"] = peak(BUILD_BM25, str(corpus), str(work / f"kb_bm25_{n}"))["peak_rss_mb"]
    shutil.rmtree(work / f"kb_bm25_{n}", ignore_errors=True)
    res["disk_mb"] = {p.name: round(du_mb(p) if p.is_dir() else p.stat().st_size / 2**20, 1) for p in kb.iterdir()}
    res["load"] = peak(LOAD, str(kb), str(queries))
    if anchor:
        cache = work / f"hf_cache_{n}"
        shutil.rmtree(cache, ignore_errors=True)
        res["anchor_hf_datasets"] = peak(ANCHOR, str(corpus), str(cache))
        shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(res), flush=True)
    return res


def project(small: dict, big: dict, key: tuple[str, ...]) -> float:
    def get(r: dict) -> float:
        v: object = r
        for k in key:
            v = v[k]  # type: ignore[index]
        return float(v)  # type: ignore[arg-type]

    if "seconds" in key[-1]:  # times: proportional (two small runs on a shared CPU are too noisy to fit)
        return get(big) * WIKI18 / big["passages"]
    slope = max(0.0, (get(big) - get(small)) / (big["passages"] - small["passages"]))
    return get(big) + slope * (WIKI18 - big["passages"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/agentrag_kb_scale"))
    ap.add_argument("--no-anchor", action="store_true", help="skip the HF datasets load")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    small = measure(max(args.passages // 10, 20_000), args.work, args.queries, not args.no_anchor)
    big = measure(args.passages, args.work, args.queries, not args.no_anchor)
    print(f"\n## {big['passages']:,} passages (projection to wiki-18, {WIKI18:,}: linear through "
          f"{small['passages']:,} and {big['passages']:,})\n")
    print("| quantity | measured | projected to 21M |\n|---|---|---|")
    rows = [("build peak RSS (MB)", ("build", "peak_rss_mb")), ("build seconds", ("build", "seconds")),
            ("load peak RSS incl. 200 queries (MB)", ("load", "peak_rss_mb")),
            ("build peak RSS, --method bm25 only (MB)", ("build", "bm25_only_peak")),
            ("RSS after load (MB)", ("load", "rss_after_load_mb")),
            ("anonymous RSS after load (MB)", ("load", "anon_after_load_mb")),
            ("anonymous RSS after 3x200 queries (MB)", ("load", "anon_after_queries_mb")),
            ("load seconds", ("load", "load_seconds"))]
    if not args.no_anchor:
        rows += [("anchor: HF datasets load, peak RSS (MB)", ("anchor_hf_datasets", "peak_rss_mb")),
                 ("anchor: HF datasets load seconds", ("anchor_hf_datasets", "seconds"))]
    for label, key in rows:
        v = big
        for k in key:
            v = v[k]
        print(f"| {label} | {float(v):,.1f} | {project(small, big, key):,.0f} |")
    disk = sum(big["disk_mb"].values())
    print(f"| disk (MB): {big['disk_mb']} | {disk:,.0f} | {disk * WIKI18 / big['passages']:,.0f} |")
    print(f"\nqueries/s (1 query per call, k=10): bm25 {big['load']['bm25_qps']:.1f}, dense (IVF-PQ, nprobe 16) "
          f"{big['load']['dense_qps']:.1f}, hybrid {big['load']['hybrid_qps']:.1f}")


if __name__ == "__main__":
    main()
