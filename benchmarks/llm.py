"""LLM backend benchmarks (ratios vs a baseline measured in the same process).

1. Embedded generation: tokens/s of ``EmbeddedLLM.chat`` vs ``llama_cpp.Llama.create_chat_completion``
   called directly on the same model, prompts and settings (ratio ours/direct; ~1.0 is the goal).
2. Client overhead: wall time of ``OpenAIBackend.chat`` vs the raw ``openai`` client against a
   local stub server with a fixed latency (ratio ours/raw; ~1.0 is the goal).

3. Thread settings: tokens/s of the embedded model with agentrag's defaults (1 generation thread,
   2 prompt threads) vs the previous default (2 threads for both), same process, same prompts,
   OMP_WAIT_POLICY=PASSIVE as agentrag sets it (ratio new/old; docs/llm.md explains the choice).

Usage: python benchmarks/llm.py [--max-tokens 64] [--rounds 2] [--calls 50] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import os
import time

from agentrag.llm.bench import BENCH_PROMPTS, measure
from agentrag.records import Message


def bench_embedded(max_tokens: int, rounds: int) -> None:
    from agentrag.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM()
    llama = llm.llama
    measure(llm, prompts=["warm up"], max_tokens=8)
    ours = measure(llm, max_tokens=max_tokens, rounds=rounds)

    tokens = 0
    start = time.perf_counter()
    for _ in range(rounds):
        for p in BENCH_PROMPTS:
            resp = llama.create_chat_completion(messages=[{"role": "user", "content": p}], temperature=0.0,
                                                max_tokens=max_tokens, seed=0)
            tokens += resp["usage"]["completion_tokens"]
    wall = time.perf_counter() - start
    direct = tokens / wall
    print(f"embedded ours:   {ours['tokens_per_s']:8.1f} tokens/s ({ours['completion_tokens']} tokens)")
    print(f"embedded direct: {direct:8.1f} tokens/s ({tokens} tokens)")
    print(f"ratio ours/direct tokens/s: {ours['tokens_per_s'] / direct:.3f}")


def bench_threads(max_tokens: int, rounds: int) -> None:
    from agentrag.llm.embedded import EmbeddedLLM

    new = EmbeddedLLM()  # the defaults: n_threads=1, n_threads_batch=2
    old = EmbeddedLLM(n_threads=2, n_threads_batch=2)
    for llm in (new, old):
        measure(llm, prompts=["warm up"], max_tokens=8)
    tps: dict[str, list[float]] = {"new": [], "old": []}
    for _ in range(rounds):  # interleaved, so a change in machine load hits both alike
        tps["new"].append(measure(new, max_tokens=max_tokens, rounds=1)["tokens_per_s"])
        tps["old"].append(measure(old, max_tokens=max_tokens, rounds=1)["tokens_per_s"])
    n, o = sum(tps["new"]) / rounds, sum(tps["old"]) / rounds
    print(f"threads 1 gen / 2 prompt (default): {n:8.1f} tokens/s")
    print(f"threads 2 gen / 2 prompt (old):     {o:8.1f} tokens/s")
    print(f"ratio default/old tokens/s: {n / o:.2f}")


def bench_client(calls: int, latency: float) -> None:
    import openai

    from agentrag.llm.openai_backend import OpenAIBackend
    from agentrag.testing import StubOpenAIServer

    with StubOpenAIServer(reply="a short answer", latency=latency) as srv:
        raw = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0, timeout=10)
        ours = OpenAIBackend("stub", base_url=srv.base_url, api_key="k", timeout=10)
        msgs = [Message(role="user", content="hello")]
        raw.chat.completions.create(model="stub", messages=[{"role": "user", "content": "hello"}])
        ours.chat(msgs)

        start = time.perf_counter()
        for _ in range(calls):
            raw.chat.completions.create(model="stub", messages=[{"role": "user", "content": "hello"}],
                                        max_tokens=512)
        t_raw = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(calls):
            ours.chat(msgs)
        t_ours = time.perf_counter() - start
    print(f"client raw openai: {1000 * t_raw / calls:7.2f} ms/call ({calls} calls, stub latency {latency}s)")
    print(f"client ours:       {1000 * t_ours / calls:7.2f} ms/call")
    print(f"ratio ours/raw wall time: {t_ours / t_raw:.3f}")


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the agentrag CLI sets it
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--skip-embedded", action="store_true")
    args = ap.parse_args()
    bench_client(args.calls, args.latency)
    if not args.skip_embedded:
        bench_embedded(args.max_tokens, args.rounds)
        bench_threads(args.max_tokens, args.rounds)


if __name__ == "__main__":
    main()
