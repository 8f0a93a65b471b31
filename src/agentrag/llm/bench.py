"""Throughput measurement of any LLM backend (used by ``agentrag llm bench`` and benchmarks/llm.py)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentrag.llm.base import LLM
from agentrag.records import Message

BENCH_PROMPTS = [
    "Explain in two sentences what a search engine index is.",
    "Write a short paragraph about the history of Paris.",
    "List three facts about the planet Mars.",
    "Describe how a bicycle works in a few sentences.",
]


def measure(llm: LLM, prompts: list[str] | None = None, *, max_tokens: int = 64, concurrency: int = 1,
            rounds: int = 1) -> dict[str, Any]:
    """Generate for each prompt (greedy, fixed max_tokens) and report tokens/s and latency."""
    prompts = prompts or BENCH_PROMPTS
    jobs = [[Message(role="user", content=p)] for _ in range(rounds) for p in prompts]

    def one(msgs: list[Message]) -> tuple[int, float]:
        start = time.perf_counter()
        out = llm.chat(msgs, temperature=0.0, max_tokens=max_tokens, seed=0)
        return sum(c.usage.completion_tokens for c in out), time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, jobs))
    wall = time.perf_counter() - start
    tokens = sum(t for t, _ in results)
    latencies = sorted(lat for _, lat in results)
    return {"model": llm.model, "requests": len(jobs), "completion_tokens": tokens, "wall_s": round(wall, 3),
            "tokens_per_s": round(tokens / wall, 2) if wall > 0 else 0.0,
            "latency_p50_s": round(latencies[len(latencies) // 2], 4),
            "latency_max_s": round(latencies[-1], 4)}


__all__ = ["measure", "BENCH_PROMPTS"]
