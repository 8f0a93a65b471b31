"""Passage store: SQLite (what agentrag uses) vs an Arrow IPC file memory-mapped with pyarrow.

For one FlashRAG corpus file: write time, file size, anonymous RSS growth (RssAnon: memory not backed by the file) after opening (for Arrow: plus
the id -> row map a get-by-id needs), and random gets by row and by id per second. Each store
is measured in a fresh process.

    PYTHONPATH=src .venv/bin/python benchmarks/passage_store.py CORPUS.jsonl [--gets 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

from _shared import DATA

CODE = textwrap.dedent("""
    import json, os, random, sys, time
    def rss():
        return int(next(l for l in open("/proc/self/status") if l.startswith("RssAnon")).split()[1]) / 1024
    kind, corpus, work, gets = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    from agentrag.kb.ingest import read_corpus
    from agentrag.records import Passage
    import pyarrow as pa, pyarrow.ipc as ipc
    base = rss()
    t0 = time.perf_counter()
    if kind == "sqlite":
        from agentrag.kb.passages import PassageStore
        path = os.path.join(work, "p.sqlite")
        w = PassageStore(path, writable=True); w.append(read_corpus(corpus)); w.finish(); w.close()
    else:
        path = os.path.join(work, "p.arrow")
        schema = pa.schema([("id", pa.string()), ("title", pa.string()), ("text", pa.string())])
        with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, schema) as wr:
            buf = []
            for p in read_corpus(corpus):
                buf.append(p)
                if len(buf) == 5000:
                    wr.write_batch(pa.record_batch([[x.id for x in buf], [x.title for x in buf], [x.text for x in buf]], schema=schema)); buf = []
            if buf:
                wr.write_batch(pa.record_batch([[x.id for x in buf], [x.title for x in buf], [x.text for x in buf]], schema=schema))
    write_s = time.perf_counter() - t0
    base = rss()
    t0 = time.perf_counter()
    if kind == "sqlite":
        store = PassageStore(path); n = len(store)
        by_row = lambda r: store.by_rows([r])[0]
        by_id = lambda i: store.by_id(i)
    else:
        table = ipc.open_file(pa.memory_map(path, "r")).read_all()
        n = table.num_rows
        ids = table.column("id").to_pylist()
        row_of = {x: i for i, x in enumerate(ids)}
        del ids
        def by_row(r):
            t = table.slice(r, 1).to_pylist()[0]
            return Passage.model_construct(id=t["id"], title=t["title"], text=t["text"], metadata={})
        by_id = lambda i: by_row(row_of[i])
    open_s = time.perf_counter() - t0
    open_mb = rss() - base
    rng = random.Random(0)
    rows = [rng.randrange(n) for _ in range(gets)]
    t0 = time.perf_counter(); got = [by_row(r) for r in rows]; row_ps = gets / (time.perf_counter() - t0)
    t0 = time.perf_counter(); [by_id(p.id) for p in got]; id_ps = gets / (time.perf_counter() - t0)
    print(json.dumps({"store": kind, "passages": n, "write_s": round(write_s, 1), "file_mb": round(os.path.getsize(path) / 2**20, 1),
                      "open_s": round(open_s, 2), "rss_growth_mb": round(rss() - base, 1),
                      "bytes_per_passage_in_ram": round((rss() - base) * 2**20 / n),
                      "get_by_row_per_s": round(row_ps), "get_by_id_per_s": round(id_ps)}))
""")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", default=str(DATA / "corpora" / "2wiki_passages_6119.jsonl"),
                    help="a {title,text} or FlashRAG corpus (default: the shared 2Wiki corpus)")
    ap.add_argument("--gets", type=int, default=2000)
    ap.add_argument("--work", default="/tmp/agentrag_passage_store")
    args = ap.parse_args()
    import os
    import shutil

    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    print("| store | passages | write s | file MB | open s | anon RAM growth MB (open + gets) | B/passage | gets by row/s | "
          "gets by id/s |\n|---|---|---|---|---|---|---|---|---|")
    for kind in ("sqlite", "arrow"):
        out = subprocess.run([sys.executable, "-c", CODE, kind, args.corpus, args.work, str(args.gets)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"| {r['store']} | {r['passages']:,} | {r['write_s']} | {r['file_mb']} | {r['open_s']} | "
              f"{r['rss_growth_mb']} | {r['bytes_per_passage_in_ram']} | {r['get_by_row_per_s']:,} | "
              f"{r['get_by_id_per_s']:,} |")


if __name__ == "__main__":
    main()
