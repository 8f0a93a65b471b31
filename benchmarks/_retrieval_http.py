"""HTTP part of benchmarks/retrieval.py: `agentrag kb serve` (a real server process) vs the same KB
searched in process, at concurrency 16, and the latency of a small request while a large one runs.

The load generator is a lean asyncio HTTP/1.1 client (pre-encoded requests on keep-alive
connections) so that the client's own CPU, on the same machine, stays small next to the server's.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

CONCURRENCY = 16


@contextmanager
def kb_server(kb_dir: Path, *, workers: int = 1, method: str = "bm25", server_src: Path | None = None) -> Iterator[int]:
    """`agentrag kb serve KB --method METHOD --workers N` on a free port (agentrag imported from
    ``server_src`` when given, e.g. an older checkout's src/); yields the port."""
    env = {**os.environ}
    if server_src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(server_src), *filter(None, [env.get("PYTHONPATH")])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "agentrag.cli.main", "kb", "serve", str(kb_dir), "--port",
                             str(port), "--method", method, "--workers", str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"kb serve did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _request(body: dict) -> bytes:
    raw = json.dumps(body).encode()
    return (b"POST /retrieve HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(raw)) + raw


async def _roundtrip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> bytes:
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    body = await reader.readexactly(length)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
    return body


async def _load(port: int, requests: list[bytes], seconds: float, concurrency: int) -> tuple[int, float]:
    """Send ``requests`` round-robin from ``concurrency`` connections for ``seconds``: (done, elapsed)."""
    done = 0
    stop = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        i = w
        while time.perf_counter() < stop:
            await _roundtrip(reader, writer, requests[i % len(requests)])
            done += 1
            i += concurrency
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done, time.perf_counter() - t0


def http_rate(port: int, bodies: list[dict], seconds: float, concurrency: int = CONCURRENCY) -> float:
    """Requests per second over HTTP."""
    reqs = [_request(b) for b in bodies]
    asyncio.run(_load(port, reqs, 0.5, concurrency))  # warm-up: connections, page cache
    done, elapsed = asyncio.run(_load(port, reqs, seconds, concurrency))
    return done / elapsed


def inprocess_rate(search: Callable[[list[str]], object], batches: list[list[str]], seconds: float,
                   concurrency: int = CONCURRENCY) -> float:
    """Calls per second of ``search(batch)`` from ``concurrency`` threads in this process."""
    done = [0] * concurrency
    stop = time.perf_counter() + seconds

    def worker(w: int) -> None:
        i = w
        while time.perf_counter() < stop:
            search(batches[i % len(batches)])
            done[w] += 1
            i += concurrency

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


async def _latencies(port: int, req: bytes, n: int, gap: float) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await _roundtrip(reader, writer, req)
        out.append(time.perf_counter() - t0)
        await asyncio.sleep(gap)
    writer.close()
    return out


async def _small_during_large(port: int, small: bytes, large: bytes, n: int, gap: float) -> tuple[list[float],
                                                                                                 list[float]]:
    """Small-request latencies while a second connection sends large requests back to back."""
    big_times: list[float] = []
    stop = asyncio.Event()

    async def big() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not stop.is_set():
            t0 = time.perf_counter()
            await _roundtrip(reader, writer, large)
            big_times.append(time.perf_counter() - t0)
        writer.close()

    task = asyncio.create_task(big())
    await asyncio.sleep(0.05)
    small_times = await _latencies(port, small, n, gap)
    stop.set()
    await task
    return small_times, big_times


def large_vs_small(port: int, small: dict, large: dict, n: int = 60, gap: float = 0.01) -> dict[str, float]:
    """Median and p95 of a small request alone and while large requests run; the large one's time."""
    s_req, l_req = _request(small), _request(large)
    alone = asyncio.run(_latencies(port, s_req, n, gap))
    during, big = asyncio.run(_small_during_large(port, s_req, l_req, n, gap))
    alone_big = asyncio.run(_latencies(port, l_req, 3, 0.0))

    def p95(xs: list[float]) -> float:
        return sorted(xs)[max(0, int(0.95 * len(xs)) - 1)]

    return {"alone_median": statistics.median(alone), "alone_p95": p95(alone),
            "during_median": statistics.median(during), "during_p95": p95(during),
            "large_alone": statistics.median(alone_big), "large_during": statistics.median(big) if big else 0.0,
            "large_requests": float(len(big))}


def http_benchmark(kb_dir: Path, search: Callable[[list[str], int], object], qs: list[str], *, seconds: float,
                   workers: list[int], rounds: int = 2, server_src: Path | None = None) -> None:
    """Print HTTP vs in-process throughput (BM25, concurrency 16) for single queries and 32-query
    batches, per server worker count, and the small-vs-large latency table."""
    batches = [(qs * 32)[i:i + 32] for i in range(0, 32 * len(qs), 32)][: len(qs)]
    shapes = {"single": ([[q] for q in qs], [{"queries": [q], "topk": 3, "return_scores": True} for q in qs]),
              "batch32": (batches, [{"queries": b, "topk": 3, "return_scores": True} for b in batches])}
    print(f"HTTP vs in-process, BM25, topk 3, concurrency {CONCURRENCY}, {seconds:.0f} s per measurement, best of "
          f"{rounds} alternated (queries/s)")
    print("| shape | server workers | in-process q/s | HTTP q/s | RATIO http/in-process |")
    print("|---|---|---|---|---|")
    for w in workers:
        with kb_server(kb_dir, workers=w, server_src=server_src) as port:
            for name, (calls, bodies) in shapes.items():
                per_call = len(calls[0])
                best_in = best_http = 0.0
                for _ in range(rounds):
                    best_in = max(best_in, per_call * inprocess_rate(lambda b: search(b, 3), calls, seconds))
                    best_http = max(best_http, per_call * http_rate(port, bodies, seconds))
                print(f"| {name} | {w} | {best_in:.0f} | {best_http:.0f} | {best_http / best_in:.2f} |")
    with kb_server(kb_dir, workers=1, server_src=server_src) as port:
        large = {"queries": (qs * (512 // len(qs) + 1))[:512], "topk": 8, "return_scores": True}
        r = large_vs_small(port, {"queries": qs[:1], "topk": 3, "return_scores": True}, large)
    print("small request (1 query, topk 3) latency, 1 worker, alone vs while 512 queries x topk 8 (the default "
          "--max-work 4096) run back to back on another connection:")
    print("| small alone median / p95 | small during median / p95 | large request | RATIO small-during p95 / large |")
    print("|---|---|---|---|")
    print(f"| {1e3 * r['alone_median']:.1f} / {1e3 * r['alone_p95']:.1f} ms | {1e3 * r['during_median']:.1f} / "
          f"{1e3 * r['during_p95']:.1f} ms | {1e3 * r['large_during']:.0f} ms | "
          f"{r['during_p95'] / max(r['large_during'], 1e-9):.2f} |")


if __name__ == "__main__":
    print("helpers of benchmarks/retrieval.py; its HTTP part alone: benchmarks/retrieval.py --http-only")
