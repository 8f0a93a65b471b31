"""A trained checkpoint on llama.cpp (``--llm embedded:PATH.gguf``) vs the same checkpoint through ``hf:``.

Same process, same fixed prompt set, greedy decoding, the same ``max_tokens``: the agent's first two
react turns (the loop's compact system prompt, the ``dense_search`` tool; turn 2 adds a search and
its observation) for the first questions of the shared *training* files (MuSiQue, 2Wiki; no dev
question is read). Prints the agreement rate (a prompt agrees when text and tool calls are equal),
the mean shared-prefix length of the two outputs in characters, tokens/s of each backend and
their ratio (gguf / hf), and the load average before and after.

Usage: python benchmarks/llm_gguf.py --checkpoint RUN/checkpoint [--gguf RUN/checkpoint.q8_0.gguf]
       [--quant q8_0] [--questions 6] [--max-tokens 48]
Without --gguf the GGUF is written into a temporary directory with --quant (removed at the end). Without --checkpoint the
untrained embedded model is saved as a checkpoint first (same architecture and size).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agentrag.agents.tools import search_tool_schema
from agentrag.llm.base import LLM
from agentrag.records import Message, ToolCall

SHARED = Path(os.environ.get("AGENTRAG_SHARED", "../shared")) / "data"
SYSTEM = ("Answer the question with the `dense_search` search tool. Search one fact at a time with a short, "
          "self-contained query. When you know the answer, write it inside <answer></answer>: a few words only "
          "(a name, date, place, number or yes/no).")


def prompts(n: int) -> list[list[Message]]:
    """Turn 1 and turn 2 of the react agent for the first ``n`` questions of each training file."""
    out = []
    for path, n_take in ((SHARED / "musique" / "train_397.jsonl", n), (SHARED / "2wikimultihopqa" / "train_600.jsonl", n)):
        with open(path, encoding="utf-8") as f:
            for line, _ in zip(f, range(n_take), strict=False):
                rec = json.loads(line)
                paras = rec.get("paragraphs") or []
                if paras:
                    title, text = paras[0]["title"], paras[0]["paragraph_text"]
                else:  # 2Wiki: context = [[title, [sentences]], ...]
                    title, sents = rec["context"][0]
                    text = " ".join(sents)
                first = [Message(role="system", content=SYSTEM), Message(role="user", content=rec["question"])]
                call = ToolCall(id="call_0", name="dense_search", arguments={"query": rec["question"][:80]})
                second = first + [Message(role="assistant", content="", tool_calls=[call]),
                                  Message(role="tool", content=f"Doc 1 (Title: {title}) {text[:200]}",
                                          tool_call_id="call_0", name="dense_search")]
                out += [first, second]
    return out


def run(llm: LLM, batch: list[list[Message]], tools: list[dict[str, Any]], max_tokens: int) -> tuple[list[str], float]:
    outs, tokens, wall = [], 0, 0.0
    for msgs in batch:
        start = time.perf_counter()
        c = llm.chat(msgs, tools=tools, temperature=0.0, max_tokens=max_tokens)[0]
        wall += time.perf_counter() - start
        tokens += c.usage.completion_tokens
        outs.append(json.dumps({"text": c.text or "", "calls": [[t.name, t.arguments] for t in c.tool_calls]}))
    return outs, tokens / wall if wall else 0.0


def shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def base_checkpoint(out: Path) -> Path:
    from agentrag.export.masking import training_chat_template
    from agentrag.train.model import load_tokenizer, load_trainable_model

    tok = load_tokenizer("embedded")
    tok.chat_template = training_chat_template()
    load_trainable_model("embedded").save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--gguf", type=Path)
    ap.add_argument("--quant", default="q8_0", choices=["q8_0", "f16"])
    ap.add_argument("--questions", type=int, default=6, help="per training file (2 prompts each)")
    ap.add_argument("--max-tokens", type=int, default=48)
    args = ap.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="agentrag-gguf-") as tmp_dir:
        bench(args, Path(tmp_dir), load_start)


def bench(args: argparse.Namespace, tmp: Path, load_start: tuple[float, float, float]) -> None:
    from agentrag.llm.embedded import EmbeddedLLM
    from agentrag.llm.hf import HFLLM
    from agentrag.train.gguf import gguf_info, write_gguf

    ckpt = args.checkpoint or base_checkpoint(tmp / "checkpoint")
    gguf = args.gguf or write_gguf(ckpt, tmp / f"checkpoint.{args.quant}.gguf", args.quant)
    info = gguf_info(gguf)
    tools = [search_tool_schema()]
    batch = prompts(args.questions)
    hf, gg = HFLLM(ckpt), EmbeddedLLM(gguf)
    for llm in (hf, gg):  # load and warm up
        llm.chat(batch[0], tools=tools, temperature=0.0, max_tokens=4)
    # interleaved halves, so a change in machine load hits both alike
    half = len(batch) // 2
    h1, t_h1 = run(hf, batch[:half], tools, args.max_tokens)
    g1, t_g1 = run(gg, batch[:half], tools, args.max_tokens)
    g2, t_g2 = run(gg, batch[half:], tools, args.max_tokens)
    h2, t_h2 = run(hf, batch[half:], tools, args.max_tokens)
    h_out, g_out = h1 + h2, g1 + g2
    agree = sum(a == b for a, b in zip(h_out, g_out, strict=True))
    prefix = sum(shared_prefix(a, b) / max(1, max(len(a), len(b))) for a, b in zip(h_out, g_out, strict=True))
    tps_h, tps_g = (t_h1 + t_h2) / 2, (t_g1 + t_g2) / 2
    print(f"checkpoint {ckpt}  gguf {gguf} ({info['types']}, prompt_format {info['prompt_format']})")
    print(f"prompts: {len(batch)} (react turns 1-2, {args.questions} MuSiQue + {args.questions} 2Wiki training "
          f"questions), greedy, max_tokens {args.max_tokens}")
    print(f"agreement (text and tool calls equal): {agree}/{len(batch)} = {agree / len(batch):.2f}; "
          f"mean shared prefix {prefix / len(batch):.2f} of the longer output")
    print(f"hf:       {tps_h:8.1f} tokens/s")
    print(f"embedded: {tps_g:8.1f} tokens/s")
    print(f"ratio gguf/hf tokens/s: {tps_g / tps_h:.2f}")
    print(f"load average: {load_start[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    for i, (a, b) in enumerate(zip(h_out, g_out, strict=True)):
        if a != b:
            print(f"  differs #{i}: hf {a[:120]!r}\n             gguf {b[:120]!r}")


if __name__ == "__main__":
    main()
