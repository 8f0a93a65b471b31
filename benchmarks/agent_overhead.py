"""Agent + evaluation overhead over a slow LLM server.

200 questions, the `react` agent, agentrag's OpenAI backend at concurrency 16 against a local
OpenAI-compatible stub server whose every answer (decided by a ScriptedLLM) takes a fixed 100 ms;
retrieval is an O(1) lookup.
Ideal wall time = LLM calls x 0.1 s / 16; the ratio wall / ideal shows what the agent loop,
the HTTP client, retrieval, scoring and result writing add. Target: <= 1.2.

Usage: python benchmarks/agent_overhead.py [--questions 200] [--concurrency 16] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrag.agents import build_agent
from agentrag.eval.runner import evaluate, summarize
from agentrag.llm import OpenAIBackend
from agentrag.llm.config import LLMConfig
from agentrag.records import Hit, Message, Passage, QAItem, ToolCall
from agentrag.testing import ScriptedLLM


class LookupRetriever:
    """O(1) retrieval (the passage named by the query's last number), so the ratio measures the
    agent loop, the HTTP client and the eval bookkeeping rather than a scan over a corpus."""

    def __init__(self, passages: list[Passage]):
        self.by_number = {p.id[1:]: p for p in passages}

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Hit]]:
        out = []
        for q in queries:
            p = self.by_number.get(q.split()[-1].rstrip("?"))
            out.append([Hit(id=p.id, title=p.title, text=p.text, score=1.0, method="lookup")] if p else [])
        return out


def script(messages: list[Message], **_: Any) -> Any:
    """Search once, then answer from the observation: two LLM calls per question."""
    question = next(m.content for m in messages if m.role == "user") or ""
    if any(m.role == "tool" for m in messages):
        return f"<answer>item {question.split()[-1].rstrip('?')}</answer>"
    return ToolCall(name="dense_search", arguments={"query": question, "top_k": 3})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops bursts of new connections


class StubServer:
    """POST /v1/chat/completions answered by a ScriptedLLM after a fixed latency; GET /stats
    returns the request count. Runs in its own process (``serve``), so it does not share the
    client's interpreter lock."""

    def __init__(self, latency: float):
        self.latency = latency
        self.scripted = ScriptedLLM(default=script)
        self.requests = 0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in separate writes; with Nagle + delayed ACKs each response
            # would wait ~40 ms for nothing
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, data: str) -> None:
                raw = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._send(json.dumps({"requests": stub.requests}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.requests += 1
                messages = []
                for m in body["messages"]:
                    calls = [ToolCall(id=c["id"], name=c["function"]["name"],
                                      arguments=json.loads(c["function"]["arguments"]))
                             for c in m.get("tool_calls") or []]
                    messages.append(Message(role=m["role"], content=m.get("content"), tool_calls=calls,
                                            tool_call_id=m.get("tool_call_id")))
                completion = stub.scripted.chat(messages)[0]
                msg: dict[str, Any] = completion.as_message().to_openai()
                time.sleep(stub.latency)
                data = json.dumps({"id": "stub", "object": "chat.completion", "created": 0,
                                   "model": body.get("model", "stub"),
                                   "choices": [{"index": 0, "message": msg,
                                                "finish_reason": "tool_calls" if msg.get("tool_calls") else "stop"}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
                self._send(data)

        self.server = _Server(("127.0.0.1", 0), Handler)


def serve(latency: float, ports: Any) -> None:
    stub = StubServer(latency)
    ports.put(stub.server.server_address[1])
    stub.server.serve_forever()


class StubProcess:
    """The stub server in a child process (context manager)."""

    def __init__(self, latency: float):
        ctx = mp.get_context("spawn")
        self.ports = ctx.Queue()
        self.proc = ctx.Process(target=serve, args=(latency, self.ports), daemon=True)

    def __enter__(self) -> StubProcess:
        self.proc.start()
        self.base_url = f"http://127.0.0.1:{self.ports.get(timeout=60)}/v1"
        return self

    def requests(self) -> int:
        with urllib.request.urlopen(self.base_url + "/stats") as resp:
            return int(json.loads(resp.read())["requests"])

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        self.proc.join()


def raw_http_baseline(base_url: str, calls: int, concurrency: int) -> float:
    """Seconds for ``calls`` bare chat requests (no agent, no SDK) on ``concurrency`` threads."""
    import httpx

    body = {"model": "stub", "messages": [{"role": "user", "content": "What is item 0?"}]}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(limits=limits, timeout=60) as client, ThreadPoolExecutor(concurrency) as pool:
        client.post(base_url + "/chat/completions", json=body)
        t0 = time.perf_counter()
        list(pool.map(lambda _: client.post(base_url + "/chat/completions", json=body).raise_for_status(),
                      range(calls)))
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()

    items = [QAItem(id=f"q{i}", question=f"What is item {i}?", golden_answers=[f"item {i}"], hops=1)
             for i in range(args.questions)]
    passages = [Passage(id=f"p{i}", title=f"Item {i}", text=f"item {i} is described here") for i in range(200)]
    with StubProcess(args.latency) as stub, tempfile.TemporaryDirectory() as tmp:
        cfg = LLMConfig(backend="openai", model="stub", base_url=stub.base_url, api_key="x",
                        concurrency=args.concurrency, max_retries=0)
        llm = OpenAIBackend("stub", config=cfg)
        agent = build_agent("react", llm, LookupRetriever(passages))
        # warm-up in a separate run: imports, and the client's pool of `concurrency` keep-alive connections
        evaluate(agent, items[:args.concurrency], tmp + "/warm", concurrency=args.concurrency)
        before = stub.requests()
        t0 = time.perf_counter()
        results = evaluate(agent, items, tmp + "/run", concurrency=args.concurrency)
        wall = time.perf_counter() - t0
        m = summarize(results)
        calls = stub.requests() - before
        baseline = raw_http_baseline(stub.base_url, calls, args.concurrency)
    ideal = calls * args.latency / args.concurrency
    print(f"questions={len(results)}  em={m['em']}  llm_calls={calls}  concurrency={args.concurrency}  "
          f"latency={args.latency * 1000:.0f}ms")
    print(f"wall={wall:.2f}s  ideal={ideal:.2f}s  ratio={wall / ideal:.3f}  (target <= 1.2)")
    print(f"baseline: the same {calls} requests from a bare httpx client at the same concurrency took "
          f"{baseline:.2f}s (ratio to ideal {baseline / ideal:.3f}); agentrag vs baseline: {wall / baseline:.3f}")


if __name__ == "__main__":
    main()
