"""Retrieval-server throughput: `agentrag kb serve --workers N` vs 1 worker, same KB, same load.

KB: the pooled context paragraphs of the first N HotpotQA dev questions (shared data), served
with BM25 (--method bm25; dense adds the query embedding, which scales the same way). Load:
``--clients`` threads each sending ``/retrieve`` requests of ``--batch`` queries for ``--seconds``
(the client is one Python process: on a small machine it competes with the servers for the CPU).
Prints queries/s per worker count and the ratio to 1 worker (measured in one process, back to back).

    .venv/bin/python benchmarks/kb_serve.py [--workers 1,2] [--clients 16] [--seconds 8]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _shared import DATA

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.ingest import pooled_passages, questions
from agentrag.testing import HashEmbedder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("server did not start")


def load(url: str, queries: list[str], clients: int, seconds: float, per_request: int) -> float:
    done = [0] * clients
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        with httpx.Client(timeout=30) as c:
            j = i
            while time.monotonic() < stop:
                batch = [queries[(j + b) % len(queries)] for b in range(per_request)]
                r = c.post(url + "/retrieve", json={"queries": batch, "topk": 5})
                r.raise_for_status()
                done[i] += per_request
                j += clients

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8, help="Queries per request (RL rollouts batch them).")
    args = ap.parse_args()
    src = DATA / "hotpotqa" / "dev_distractor_200.jsonl"
    tmp = Path(tempfile.mkdtemp(prefix="kbserve_"))
    sub = tmp / "sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(line for _, line in zip(range(args.questions), fh, strict=False)), encoding="utf-8")
    kb = KnowledgeBase.build(pooled_passages([sub]), tmp / "kb", KBConfig(method="bm25"), embedder=HashEmbedder(),
                             progress=False)
    qs = [q for _, q, _ in questions(sub)]
    print(f"KB: {len(kb)} passages (BM25), {len(qs)} queries, {args.clients} clients x {args.batch} queries/request, {os.cpu_count()} CPUs")
    rates: dict[int, list[float]] = {}
    for _ in range(args.repeat):
        for n in [int(x) for x in args.workers.split(",")]:
            port = free_port()
            proc = subprocess.Popen([sys.executable, "-m", "agentrag.cli.main", "kb", "serve", str(tmp / "kb"),
                                     "--port", str(port), "--method", "bm25", "--workers", str(n)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                url = f"http://127.0.0.1:{port}"
                wait_ready(url, proc)
                load(url, qs, args.clients, 1.0, args.batch)  # warm every worker
                rates.setdefault(n, []).append(load(url, qs, args.clients, args.seconds, args.batch))
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    base = max(rates[min(rates)])
    for n, rs in sorted(rates.items()):
        print(f"workers={n}: {max(rs):7.1f} queries/s (runs: {', '.join(f'{r:.1f}' for r in rs)})  "
              f"ratio vs {min(rates)} worker: {max(rs) / base:.2f}x")


if __name__ == "__main__":
    main()
