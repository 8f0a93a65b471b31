"""Dense retrieval at scale on an imported IVF-PQ index: agentrag's dense search against raw FAISS on
the same index, and the serve memory of such a KB, at three or more sizes projected to wiki-18.

What a 24 GB machine does with wiki-18's dense side (docs/kb.md, "wiki-18 in practice"): the
passages are embedded elsewhere (a GPU), the FAISS IVF-PQ index is brought here and imported with
``kb import``. This benchmark does exactly that for N passages, each stage in a process of its own
(peak RSS = that process's ``ru_maxrss``):

1. *the index, made elsewhere*: raw FAISS makes an ``IndexIVFPQ`` (768 dims like e5-base, 48 x
   8-bit codes, inner product), trained on **random unit vectors** (seeded), its inverted lists
   filled with **random codes**, rows spread uniformly over the lists: the layout, size and search
   work of N encoded passages, without a model (embedding N passages here would take days,
   docs/kb.md) or encoding N vectors on this CPU. nlist is fixed (``--nlist``, 256) so that
   training stays seconds; the memory an IVF-PQ index holds per passage (its code and id) does not
   depend on nlist, and the centroids of a wiki-18 index (nlist = 4 sqrt(N)) are printed as their
   own term.
2. *import*: ``agentrag.kb.importer.import_kb`` with the corpus (N passages generated as
   kb_scale.py does, ``agentrag.testing.recombined_corpus``), the FAISS file and a BM25 index of
   one word per passage (the same word: BM25 stays out of these numbers; its own build and serve
   memory are kb_scale.py's ``--bm25-only`` rows; the two add up in one KB).
3. *serve*: ``KnowledgeBase.load`` (IVF lists memory-mapped), then queries (kb_scale.py's: a
   title and 60 characters of a passage), in alternating rounds (which side goes first alternates):
   - index only, the same query vectors: ``kb.search(q, 10, method="dense")`` with an embedder that
     returns the precomputed vector of each query (a dict look-up) against ``index.search`` on
     the KB's own FAISS index object with the same vectors;
   - end to end, the same embedder (the seeded random one: embedding is a hash and a random
     draw): ``kb.search`` against ``embedder.embed`` + ``index.search``;
   each 1 query per call and 32 per call, ours with the hits not looked at (ids and scores, like
   FAISS's) and looked at (passages read, ``Hit`` objects built). Ratios are ours/raw queries/s of
   CPU time (this process's), per round; the median and range are printed, with wall clock too.

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/kb_scale_dense.py --sizes 50000,100000,200000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import textwrap
from pathlib import Path

from kb_scale import PRELUDE, SOURCES, WIKI18, du_mb, linearity, peak, project

DIM, PQ_M = 768, 48

FAISS_BUILD = PRELUDE + textwrap.dedent("""
    import faiss
    out, n, nlist = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    t0 = time.perf_counter()
    idx = faiss.IndexIVFPQ(faiss.IndexFlatIP(768), 768, nlist, 48, 8, faiss.METRIC_INNER_PRODUCT)
    v = np.random.default_rng(0).standard_normal((max(40 * nlist, 10240), 768), dtype=np.float32)
    idx.train(v / np.linalg.norm(v, axis=1, keepdims=True))
    del v
    # the inverted lists filled with random codes, rows spread uniformly over the lists: the layout,
    # size and search work of an index of n encoded vectors, without encoding n vectors on this CPU
    rng = np.random.default_rng(1)
    lists = rng.integers(0, nlist, n)
    order = np.argsort(lists, kind="stable").astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(lists, minlength=nlist))])
    for lst in range(nlist):
        ids = np.ascontiguousarray(order[bounds[lst]:bounds[lst + 1]])
        codes = rng.integers(0, 256, (len(ids), 48), dtype=np.uint8)
        idx.invlists.add_entries(lst, len(ids), faiss.swig_ptr(ids), faiss.swig_ptr(codes))
    idx.ntotal = n
    faiss.write_index(idx, out)
    print(json.dumps({"seconds": time.perf_counter() - t0}))
""")

IMPORT = PRELUDE + textwrap.dedent("""
    from pathlib import Path
    from agentrag.kb import KBConfig
    from agentrag.kb.importer import import_kb
    from agentrag.kb.indexes import BM25Index
    corpus, faiss_path, bm25_dir, out, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    # a BM25 index of one word per passage: the import's BM25 stage costs nothing here
    BM25Index.build(Path(bm25_dir), (["dense"] * min(20000, n - lo) for lo in range(0, n, 20000)), n)
    t0 = time.perf_counter()
    cfg = KBConfig(embedder={"model": "random-unit-768"}, index={"nprobe": 16})
    import_kb(corpus, out, cfg, faiss_index=faiss_path, bm25_dir=bm25_dir, overwrite=True)
    print(json.dumps({"seconds": time.perf_counter() - t0}))
""")

SERVE = PRELUDE + textwrap.dedent("""
    import os, random
    import faiss
    from agentrag.kb import KnowledgeBase
    out, nq, rounds, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 32
    emb = RandomEmbedder()
    t0 = time.perf_counter()
    kb = KnowledgeBase.load(out, embedder=emb)
    ivf = faiss.extract_index_ivf(kb.dense.index)
    res = {"load_seconds": time.perf_counter() - t0, "rss_after_load_mb": now_rss_mb(),
           "anon_after_load_mb": now_rss_mb("RssAnon"), "nprobe": int(ivf.nprobe), "nlist": int(ivf.nlist)}
    steps = {"after load": now_rss_mb("RssAnon")}
    titles = kb.sample_titles(nq, seed=0)
    queries = [t.rsplit(" ", 1)[0] + " " + kb.get(str(random.Random(i).randrange(len(kb)))).text[:60]
               for i, t in enumerate(titles)]
    singles = [[q] for q in queries]
    blocks = [queries[i:i + batch] for i in range(0, len(queries), batch)]
    vec = {}  # each call's query vectors, embedded once: both sides search the same vectors
    for calls in (singles, blocks):
        for c in calls:
            for q, v in zip(c, emb.embed(c, kind="query")):
                vec[q] = v

    class Fixed:  # the precomputed vectors, looked up
        name, dim = emb.name, emb.dim
        def embed(self, texts, kind="query"):
            return np.stack([vec[t] for t in texts])

    steps["queries made"] = now_rss_mb("RssAnon")
    index = kb.dense.index
    fixed = KnowledgeBase.load(out, embedder=Fixed())
    fixed.dense.index = index  # the very same FAISS object on both sides
    steps["second handle"] = now_rss_mb("RssAnon")
    sides = {
        "index": {
            "raw": lambda c: index.search(np.stack([vec[t] for t in c]), 10),
            "ours": lambda c: fixed.search(c, 10, method="dense"),
            "ours_hits": lambda c: fixed.search(c, 10, method="dense")[0]},
        "e2e": {
            "raw": lambda c: index.search(emb.embed(c, kind="query"), 10),
            "ours": lambda c: kb.search(c, 10, method="dense"),
            "ours_hits": lambda c: kb.search(c, 10, method="dense")[0]}}
    for part, fns in sides.items():
        for shape, calls in (("1", singles), ("32", blocks)):
            for fn in fns.values():
                for c in calls[:4]:
                    fn(c)  # warm-up
            t = {name: {"cpu": [], "wall": []} for name in fns}
            for r in range(rounds):
                order = list(fns) if r % 2 == 0 else list(fns)[::-1]
                for name in order:
                    w, cp = time.perf_counter(), time.process_time()
                    for c in calls:
                        fns[name](c)
                    t[name]["wall"].append(time.perf_counter() - w)
                    t[name]["cpu"].append(time.process_time() - cp)
            steps[f"{part} {shape}/call"] = now_rss_mb("RssAnon")
            res[f"{part}_{shape}"] = {name: {k: [len(queries) / max(x, 1e-9) for x in v] for k, v in d.items()}
                                      for name, d in t.items()}
    res["rss_after_queries_mb"] = now_rss_mb()
    res["anon_after_queries_mb"] = now_rss_mb("RssAnon")
    res["anon_steps_mb"] = steps
    res["load_avg"] = os.getloadavg()[0]
    print(json.dumps(res))
""")


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def measure(n: int, work: Path, nlist: int, queries: int, rounds: int) -> dict:
    from agentrag.testing import recombined_corpus

    corpus = work / f"corpus_{n}.jsonl"
    if not corpus.exists():  # kb_scale.py's corpus, shared with it when --work is the same
        tmp = corpus.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in recombined_corpus(n, [str(s) for s in SOURCES]):
                fh.write(json.dumps(rec) + "\n")
        tmp.rename(corpus)
    index, bm25, kb = work / f"ivfpq_{n}.faiss", work / f"bm25_one_word_{n}", work / f"kb_dense_{n}"
    for p in (bm25, kb):
        shutil.rmtree(p, ignore_errors=True)
    res: dict = {"passages": n}
    res["faiss_build"] = peak(FAISS_BUILD, str(index), str(n), str(nlist))
    res["index_mb"] = index.stat().st_size / 2**20
    res["import"] = peak(IMPORT, str(corpus), str(index), str(bm25), str(kb), str(n))
    res["disk_mb"] = {p.name: round(du_mb(p) if p.is_dir() else p.stat().st_size / 2**20, 1) for p in kb.iterdir()}
    res["serve"] = peak(SERVE, str(kb), str(queries), str(rounds))
    print(json.dumps(res), flush=True)
    for p in (bm25, kb, index):
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return res


def ratio_row(r: dict, key: str, ours: str, clock: str) -> str:
    d = r["serve"][key]
    rs = sorted(a / b for a, b in zip(d[ours][clock], d["raw"][clock], strict=True))
    return f"{median(rs):.2f} ({rs[0]:.2f}-{rs[-1]:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50000,100000,200000",
                    help="passages, comma-separated, at least three; the projection goes through the largest two")
    ap.add_argument("--nlist", type=int, default=256)
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds per comparison")
    ap.add_argument("--work", type=Path, default=Path("/tmp/agentrag_kb_scale"))
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip()})
    if len(sizes) < 3:
        ap.error(f"--sizes needs at least three distinct sizes (a line through two cannot be checked), got {sizes}")
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    base = peak(PRELUDE + "import faiss\nfrom agentrag.kb import KnowledgeBase\n"
                "print(json.dumps({'anon_mb': now_rss_mb('RssAnon')}))")
    runs = [measure(n, args.work, args.nlist, args.queries, args.rounds) for n in sizes]
    small, big = runs[-2], runs[-1]
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n## dense (imported IVF-PQ, {DIM} dims, {PQ_M} x 8-bit codes, nlist {args.nlist}, nprobe "
          f"{big['serve']['nprobe']}, random unit vectors) at {', '.join(f'{n:,}' for n in sizes)} passages; "
          f"projection to wiki-18 ({WIKI18:,}) linear through {small['passages']:,} and {big['passages']:,}\n")
    print(f"The benchmark's own memory, not in the rows: a process with the same imports and nothing loaded peaks at "
          f"{base['peak_rss_mb']:,.0f} MB (anonymous {base['anon_mb']:,.0f} MB), a fixed term (the line's intercept).\n")
    from agentrag.kb.hits import cache_bytes

    cached = [r["passages"] for r in runs if r["disk_mb"]["passages.sqlite"] * 2**20 <= cache_bytes()]
    if cached:
        print(f"NOTE: at {', '.join(f'{n:,}' for n in cached)} passages passages.sqlite is under the passage cache "
              f"({cache_bytes() / 2**20:.0f} MB, AGENTRAG_PASSAGE_CACHE_MB): the first search reads every row into "
              f"memory, so memory after the queries grows with N there and stops above it; project from larger "
              f"sizes.\n")
    wiki_nlist = int(4 * WIKI18 ** 0.5)
    centroids = wiki_nlist * DIM * 4 / 2**20
    print("| quantity | " + " | ".join(f"{n:,}" for n in sizes) + " | projected to 21M | linearity check |")
    print("|---|" + "---|" * len(sizes) + "---|---|")
    rows = [("index made elsewhere: raw FAISS build peak RSS (MB)", ("faiss_build", "peak_rss_mb")),
            ("index file (MB)", ("index_mb",)),
            ("import peak RSS (MB; BM25 of one word)", ("import", "peak_rss_mb")),
            ("import seconds", ("import", "seconds")),
            ("serve: RSS after load (MB)", ("serve", "rss_after_load_mb")),
            ("serve: anonymous RSS after load (MB)", ("serve", "anon_after_load_mb")),
            ("serve: anonymous RSS after the queries (MB)", ("serve", "anon_after_queries_mb")),
            ("serve: peak RSS incl. queries (MB)", ("serve", "peak_rss_mb"))]
    for label, key in rows:
        vals = []
        for r in runs:
            v: object = r
            for k in key:
                v = v[k]  # type: ignore[index]
            vals.append(float(v))  # type: ignore[arg-type]
        print(f"| {label} | " + " | ".join(f"{v:,.1f}" for v in vals) +
              f" | {project(small, big, key):,.0f} | {linearity(runs, key)} |")
    print(f"\nA wiki-18 index has nlist = 4 sqrt(N) = {wiki_nlist:,} centroids, {centroids:,.0f} MB at {DIM} dims, "
          f"more than the {args.nlist} measured here ({args.nlist * DIM * 4 / 2**20:.1f} MB): add "
          f"{centroids - args.nlist * DIM * 4 / 2**20:,.0f} MB to the projected serve rows.")
    print("\nqueries/s ratios ours/raw FAISS, median of the rounds (range), CPU time of this process; wall clock "
          "beside. index: the same query vectors on both sides (ours: kb.search with an embedder that looks "
          "them up); e2e: the same embedder (ours: kb.search; raw: embed + index.search). 'no hits': ours returned, "
          "hits not looked at (ids and scores, like FAISS); 'hits': every hit built (passages read).\n")
    print("| passages | comparison | per call | raw q/s (CPU) | ours/raw, no hits (CPU) | ours/raw, hits (CPU) | "
          "ours/raw, no hits (wall) | load average |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        for part in ("index", "e2e"):
            for shape in ("1", "32"):
                key = f"{part}_{shape}"
                raw_cpu = median(r["serve"][key]["raw"]["cpu"])
                print(f"| {r['passages']:,} | {part} | {shape} | {raw_cpu:,.0f} | {ratio_row(r, key, 'ours', 'cpu')} | "
                      f"{ratio_row(r, key, 'ours_hits', 'cpu')} | {ratio_row(r, key, 'ours', 'wall')} | "
                      f"{r['serve']['load_avg']:.2f} |")


if __name__ == "__main__":
    main()
