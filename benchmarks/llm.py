"""LLM backend benchmarks (ratios vs a baseline measured in the same process).

1. Embedded generation: tokens/s of ``EmbeddedLLM.chat`` vs ``llama_cpp.Llama.create_chat_completion``
   called directly on the same model, prompts and settings (ratio ours/direct; ~1.0 is the goal).
2. Client overhead: wall time and client CPU of ``OpenAIBackend.chat`` vs the raw ``openai`` SDK client against a
   local stub server with a fixed latency (ratio ours/raw; ~1.0 is the goal).

3. Thread settings: tokens/s of the embedded model with 1 and with 2 generation threads (2 prompt
   threads both), same process, same prompts, alternating rounds, OMP_WAIT_POLICY=PASSIVE as
   agentrag sets it (ratio 1/2 per round, wall time and CPU time; docs/llm.md explains the choice).

4. Embedder: the KB build's embedding path (``embed_to_memmap`` over the default
   ``SentenceTransformerEmbedder``: longest first, chunks, a memmap with resume state) vs
   sentence-transformers' ``encode`` called directly on the same model object, the same passages
   in the same batches (longest first, ``batch_size`` 32), alternating rounds, CPU time; the
   vectors are compared too.

5. ``hf:``: ``HFLLM.chat`` vs transformers' ``generate`` called directly, each in its own process
   (loading excluded), on the same checkpoint (the embedded SmolLM2 dequantized, as ``agentrag
   train`` makes it), prompts (the benchmark prompts as one user message, the chat template's
   generation prompt), greedy settings and torch threads (``--hf-threads``, both processes, printed
   with their OMP_WAIT_POLICY), alternating which goes first; tokens/s of generation.
   ``--hf-inprocess``: the same in one process, ``generate`` called on the backend's own model object.

Usage: python benchmarks/llm.py [--max-tokens 64] [--rounds 2] [--thread-rounds 6] [--calls 50] [--latency 0.02]
       python benchmarks/llm.py --client-only [--calls 50] [--latency 0.02] [--rounds 3]
       python benchmarks/llm.py --threads-only [--thread-rounds 6]
       python benchmarks/llm.py --embedder-only [--passages 64] [--rounds 3]
       python benchmarks/llm.py --hf-only [--rounds 2] [--max-tokens 64] [--hf-threads N]
       python benchmarks/llm.py --hf-inprocess [--rounds 2] [--max-tokens 64] [--hf-threads N]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
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


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def bench_threads(max_tokens: int, rounds: int) -> None:
    """1 vs 2 generation threads (2 prompt threads both), one model each in this process, in
    alternating rounds (which goes first alternates too), so a change in machine load hits both
    alike: tokens/s of wall time and tokens per CPU second (this process's CPU time, every thread
    of it) each round, then the per-round ratios 1/2 (their range and median) and the default."""
    from agentrag.llm.config import LLMConfig
    from agentrag.llm.embedded import EmbeddedLLM

    llms = {1: EmbeddedLLM(n_threads=1, n_threads_batch=2), 2: EmbeddedLLM(n_threads=2, n_threads_batch=2)}
    for llm in llms.values():
        measure(llm, prompts=["warm up"], max_tokens=8)
    wall: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[float]] = {1: [], 2: []}
    for i in range(rounds):
        for n in (1, 2) if i % 2 == 0 else (2, 1):
            c0 = time.process_time()
            res = measure(llms[n], max_tokens=max_tokens, rounds=1)
            wall[n].append(res["tokens_per_s"])
            cpu[n].append(res["completion_tokens"] / max(time.process_time() - c0, 1e-9))
        load = os.getloadavg()[0]
        print(f"threads round {i + 1}: 1 gen thread {wall[1][-1]:6.1f} tokens/s ({cpu[1][-1]:6.1f} per CPU s), "
              f"2 gen threads {wall[2][-1]:6.1f} ({cpu[2][-1]:6.1f}); load average {load:.2f}", flush=True)

    def summary(vals: dict[int, list[float]]) -> str:
        r = sorted(a / b for a, b in zip(vals[1], vals[2], strict=True))
        return f"median {median(r):.2f}, rounds {r[0]:.2f}-{r[-1]:.2f}"

    default = LLMConfig(backend="embedded").n_threads
    print(f"threads ratio 1/2 generation threads, tokens/s (wall): {summary(wall)}")
    print(f"threads ratio 1/2 generation threads, tokens per CPU second: {summary(cpu)}")
    print(f"threads default n_threads={default}")


def bench_embedder(passages: int, rounds: int) -> None:
    import itertools
    import tempfile
    from pathlib import Path

    import numpy as np
    from _shared import DATA

    from agentrag.kb.embedders import SentenceTransformerEmbedder
    from agentrag.kb.indexes import embed_to_memmap
    from agentrag.kb.ingest import read_corpus

    texts = [p.contents for p in itertools.islice(read_corpus(DATA / "corpora" / "2wiki_passages_6119.jsonl"), passages)]
    ours = SentenceTransformerEmbedder()
    model, batch = ours.model, ours.batch_size
    prefixed = ours._prefixed(texts, "passage")
    order = np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64), kind="stable")  # as the build
    tmp = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, tmp, True)  # the memmaps go with the process

    def raw() -> np.ndarray:
        out = np.zeros((len(texts), ours.dim), dtype=np.float32)
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            out[idx] = model.encode([prefixed[j] for j in idx], batch_size=batch, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return out

    def mine(r: int) -> np.ndarray:
        return np.array(embed_to_memmap(ours, texts, tmp / f"e{r}.npy", progress=False, key=str(r)))

    raw()  # warm-up
    t_raw: list[float] = []
    t_ours: list[float] = []
    for r in range(rounds):
        for which in ("raw", "ours") if r % 2 == 0 else ("ours", "raw"):
            c0 = time.process_time()
            vecs = raw() if which == "raw" else mine(r)
            (t_raw if which == "raw" else t_ours).append(time.process_time() - c0)
            if which == "raw":
                ref = vecs
            else:
                got = vecs
        print(f"embedder round {r + 1}: raw encode {len(texts) / t_raw[-1]:6.1f} passages per CPU s, ours "
              f"{len(texts) / t_ours[-1]:6.1f}; load average {os.getloadavg()[0]:.2f}", flush=True)
    ratios = sorted(a / b for a, b in zip(t_raw, t_ours, strict=True))
    print(f"embedder ratio ours/raw (passages per CPU second; {len(texts)} passages, batches of {batch}): median "
          f"{median(ratios):.2f}, best {min(t_raw) / min(t_ours):.2f}, rounds {ratios[0]:.2f}-{ratios[-1]:.2f}; "
          f"max |ours - raw| "
          f"{float(np.abs(got - ref).max()):.2e}")


HF_OURS = """
import json, os, sys, time
from agentrag.llm.bench import BENCH_PROMPTS
from agentrag.llm.hf import HFLLM, load_checkpoint
from agentrag.records import Message
import torch
path, max_tokens = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]))
llm = HFLLM(path, device="cpu")
llm.chat([Message(role="user", content="warm up")], temperature=0.0, max_tokens=4)
tokens, texts = 0, []
w, c = time.perf_counter(), time.process_time()
for p in BENCH_PROMPTS:
    out = llm.chat([Message(role="user", content=p)], temperature=0.0, max_tokens=max_tokens)[0]
    tokens += out.usage.completion_tokens
    texts.append(out.text)
print(json.dumps({"tokens": tokens, "wall": time.perf_counter() - w, "cpu": time.process_time() - c, "texts": texts,
                  "torch_threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}))
"""

HF_RAW = """
import json, os, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from agentrag.llm.bench import BENCH_PROMPTS
path, max_tokens = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]))
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
eos = sorted({t for t in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")) if isinstance(t, int) and t >= 0})
def gen(text, n):
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True,
                                  return_dict=True)["input_ids"]
    x = torch.tensor([list(ids)])
    with torch.inference_mode():
        y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False, temperature=None,
                           top_p=None, top_k=None, eos_token_id=eos, pad_token_id=tok.pad_token_id
                           if tok.pad_token_id is not None else eos[0])[0, x.shape[1]:].tolist()
    return y[:-1] if y and y[-1] in eos else y
gen("warm up", 4)
tokens, texts = 0, []
w, c = time.perf_counter(), time.process_time()
for p in BENCH_PROMPTS:
    y = gen(p, max_tokens)
    tokens += len(y)
    texts.append(tok.decode(y, skip_special_tokens=True))
print(json.dumps({"tokens": tokens, "wall": time.perf_counter() - w, "cpu": time.process_time() - c, "texts": texts,
                  "torch_threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}))
"""


def bench_hf(max_tokens: int, rounds: int, threads: int) -> None:
    import json
    import subprocess
    import sys
    import tempfile

    from agentrag.train.model import load_tokenizer, load_trainable_model

    ckpt = tempfile.mkdtemp(prefix="agentrag-hf-bench-")
    atexit.register(shutil.rmtree, ckpt, True)  # the checkpoint (~0.5 GB) goes with the process
    load_trainable_model("embedded").save_pretrained(ckpt)
    load_tokenizer("embedded").save_pretrained(ckpt)
    runs: dict[str, list[dict]] = {"ours": [], "raw": []}
    for r in range(rounds):
        for which in ("ours", "raw") if r % 2 == 0 else ("raw", "ours"):
            out = subprocess.run([sys.executable, "-c", HF_OURS if which == "ours" else HF_RAW, ckpt,
                                  str(max_tokens), str(threads)], capture_output=True, text=True, check=True)
            runs[which].append(json.loads(out.stdout.strip().splitlines()[-1]))
        o, w = runs["ours"][-1], runs["raw"][-1]
        print(f"hf round {r + 1}: ours {o['tokens'] / o['wall']:6.1f} tokens/s ({o['tokens']} tokens), raw generate "
              f"{w['tokens'] / w['wall']:6.1f} ({w['tokens']}); same texts: {o['texts'] == w['texts']}; torch threads "
              f"{o['torch_threads']}/{w['torch_threads']}, OMP_WAIT_POLICY {o['omp_wait_policy']}/{w['omp_wait_policy']}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
    ratios = sorted((o["tokens"] / o["wall"]) / (w["tokens"] / w["wall"])
                    for o, w in zip(runs["ours"], runs["raw"], strict=True))
    cpu = sorted((o["tokens"] / o["cpu"]) / (w["tokens"] / w["cpu"]) for o, w in zip(runs["ours"], runs["raw"], strict=True))
    print(f"hf ratio ours/raw generate tokens/s (wall): median {median(ratios):.2f}, rounds "
          f"{ratios[0]:.2f}-{ratios[-1]:.2f}; per CPU second: median {median(cpu):.2f}, rounds "
          f"{cpu[0]:.2f}-{cpu[-1]:.2f}")


def bench_hf_inprocess(max_tokens: int, rounds: int, threads: int) -> None:
    """``HFLLM.chat`` and ``generate`` on the backend's own model object in one process, alternating
    rounds (which goes first alternates), the same prompts, greedy settings and torch threads as the
    separate-process comparison: does sharing a process change the ratio?"""
    import tempfile

    import torch

    from agentrag.llm.hf import HFLLM, load_checkpoint
    from agentrag.train.model import load_tokenizer, load_trainable_model

    torch.set_num_threads(threads)
    ckpt = tempfile.mkdtemp(prefix="agentrag-hf-bench-")
    atexit.register(shutil.rmtree, ckpt, True)  # the checkpoint (~0.5 GB) goes with the process
    load_trainable_model("embedded").save_pretrained(ckpt)
    load_tokenizer("embedded").save_pretrained(ckpt)
    llm = HFLLM(ckpt, device="cpu")
    model, tok, _ = load_checkpoint(llm.path, "cpu")
    eos = sorted({t for t in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")) if isinstance(t, int) and t >= 0})

    def ours(p: str) -> tuple[int, str]:
        out = llm.chat([Message(role="user", content=p)], temperature=0.0, max_tokens=max_tokens)[0]
        return out.usage.completion_tokens, out.text or ""

    def raw(p: str) -> tuple[int, str]:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True,
                                      return_dict=True)["input_ids"]
        x = torch.tensor([list(ids)])
        with torch.inference_mode():
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens, do_sample=False,
                               temperature=None, top_p=None, top_k=None, eos_token_id=eos,
                               pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos[0])
        y = y[0, x.shape[1]:].tolist()
        y = y[:-1] if y and y[-1] in eos else y
        return len(y), tok.decode(y, skip_special_tokens=True).strip()

    ours("warm up")
    raw("warm up")
    rates: dict[str, list[float]] = {"ours": [], "raw": []}
    for r in range(rounds):
        texts: dict[str, list[str]] = {}
        for which in ("ours", "raw") if r % 2 == 0 else ("raw", "ours"):
            fn = ours if which == "ours" else raw
            w, n, texts[which] = time.perf_counter(), 0, []
            for p in BENCH_PROMPTS:
                k, t = fn(p)
                n += k
                texts[which].append(t)
            rates[which].append(n / (time.perf_counter() - w))
        print(f"hf in one process, round {r + 1}: ours {rates['ours'][-1]:6.1f} tokens/s, raw generate on the same "
              f"model object {rates['raw'][-1]:6.1f}; same texts: {texts['ours'] == texts['raw']}; torch threads "
              f"{torch.get_num_threads()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    ratios = sorted(a / b for a, b in zip(rates["ours"], rates["raw"], strict=True))
    print(f"hf in one process, ratio ours/raw generate tokens/s (wall): median {median(ratios):.2f}, rounds "
          f"{ratios[0]:.2f}-{ratios[-1]:.2f}")


def bench_client(calls: int, latency: float, rounds: int = 3) -> None:
    import openai

    from agentrag.llm.openai_backend import OpenAIBackend
    from agentrag.testing import StubOpenAIServer

    with StubOpenAIServer(reply="a short answer", latency=latency) as srv:
        raw = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0, timeout=10)
        ours = OpenAIBackend("stub", base_url=srv.base_url, api_key="k", timeout=10)
        msgs = [Message(role="user", content="hello")]
        raw.chat.completions.create(model="stub", messages=[{"role": "user", "content": "hello"}])
        ours.chat(msgs)

        # interleaved rounds; wall time and the calling thread's CPU (the stub answers from another thread)
        wall = {"raw": 0.0, "ours": 0.0}
        cpu = {"raw": 0.0, "ours": 0.0}
        for _ in range(rounds):
            for side in ("raw", "ours"):
                t0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(calls):
                    if side == "raw":
                        raw.chat.completions.create(model="stub", messages=[{"role": "user", "content": "hello"}],
                                                    max_tokens=512)
                    else:
                        ours.chat(msgs, max_tokens=512)
                wall[side] += time.perf_counter() - t0
                cpu[side] += time.thread_time() - c0
    n = calls * rounds
    print(f"client raw openai SDK: {1000 * wall['raw'] / n:7.2f} ms/call wall, {1000 * cpu['raw'] / n:6.2f} ms/call "
          f"client CPU ({n} calls in {rounds} interleaved rounds, stub latency {latency}s)")
    print(f"client ours:           {1000 * wall['ours'] / n:7.2f} ms/call wall, {1000 * cpu['ours'] / n:6.2f} ms/call "
          "client CPU")
    print(f"ratio ours/raw: wall time {wall['ours'] / wall['raw']:.3f}, client CPU {cpu['ours'] / cpu['raw']:.3f}")


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the agentrag CLI sets it
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--thread-rounds", type=int, default=6, help="alternating rounds of 1 vs 2 generation threads")
    ap.add_argument("--skip-embedded", action="store_true")
    ap.add_argument("--client-only", action="store_true", help="only the OpenAI client vs the raw SDK")
    ap.add_argument("--threads-only", action="store_true", help="only the 1 vs 2 generation threads comparison")
    ap.add_argument("--embedder-only", action="store_true", help="only the embedder vs sentence-transformers")
    ap.add_argument("--hf-only", action="store_true", help="only hf: vs transformers generate")
    ap.add_argument("--hf-inprocess", action="store_true",
                    help="only hf: vs generate on the backend's own model object in this process")
    ap.add_argument("--hf-threads", type=int, default=0,
                    help="torch threads of both hf: processes (0: torch's default, the CPU count)")
    ap.add_argument("--passages", type=int, default=64, help="passages the embedder comparison embeds")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    if args.threads_only:
        bench_threads(args.max_tokens, args.thread_rounds)
        return
    hf_threads = args.hf_threads or os.cpu_count() or 1
    if args.hf_only:
        bench_hf(args.max_tokens, args.rounds, hf_threads)
        return
    if args.hf_inprocess:
        bench_hf_inprocess(args.max_tokens, args.rounds, hf_threads)
        return
    if args.embedder_only:
        bench_embedder(args.passages, max(args.rounds, 3))
        return
    bench_client(args.calls, args.latency, max(args.rounds, 3))
    if not args.skip_embedded and not args.client_only:
        bench_embedded(args.max_tokens, args.rounds)
        bench_threads(args.max_tokens, args.thread_rounds)
        bench_embedder(args.passages, max(args.rounds, 3))
        bench_hf(args.max_tokens, args.rounds, hf_threads)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
