"""Benchmark: the papers' baselines (naive, standard_rag, ircot, iter_retgen) with the embedded model,
as a suite of N questions from each shared multi-hop file, printing the papers' results table
(docs/eval.md).

    python benchmarks/baselines.py [--out runs/bench_baselines] [--n 20] [--agents naive,standard_rag,...]

The knowledge base pools the context paragraphs of the three files (``agentrag kb build``, BM25: nothing
to embed) and is built once under OUT/kb. The datasets are HotpotQA dev (distractor), 2WikiMultihopQA
dev and MuSiQue ``train_100`` (the shared data has no MuSiQue dev file; ``train_100`` is the held-out
MuSiQue file, never trained on). Agents keep their FlashRAG defaults (top-k 5, IRCoT max_iter 5,
Iter-RetGen 3 rounds, 32-token completions). Rerunning resumes (every cell is an eval run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DATA  # noqa: E402

FILES = {"hotpotqa": DATA / "hotpotqa" / "dev_distractor_200.jsonl",
         "2wikimultihopqa": DATA / "2wikimultihopqa" / "dev_with_context_164.jsonl",
         "musique": DATA / "musique" / "train_100.jsonl"}
AGENTS = ("naive", "standard_rag", "ircot", "iter_retgen")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/bench_baselines")
    ap.add_argument("--n", type=int, default=20, help="questions per dataset (the first N of each file)")
    ap.add_argument("--agents", default=",".join(AGENTS), help="comma-separated rows (the first is the reference "
                    "unless standard_rag is one of them)")
    ap.add_argument("--llm", default="embedded")
    ap.add_argument("--kb-method", default="bm25", choices=["bm25", "dense", "hybrid"])
    args = ap.parse_args()
    from agentrag.eval.suite import SuiteConfig, run_suite, suite_markdown
    from agentrag.kb import build_kb

    out = Path(args.out)
    kb = out / "kb"
    load0, t0 = os.getloadavg(), time.monotonic()
    if not (kb / "params.json").is_file():
        build_kb(list(FILES.values()), kb, method=args.kb_method)
    built = time.monotonic() - t0
    rows = [a.strip() for a in args.agents.split(",") if a.strip()]
    cfg = SuiteConfig(kb=str(kb), llm=args.llm, limit=args.n, agents=rows,  # type: ignore[arg-type]
                      datasets=[{"name": k, "path": str(v)} for k, v in FILES.items()],  # type: ignore[misc]
                      reference="standard_rag" if "standard_rag" in rows else rows[0])
    table = run_suite(cfg, out / "suite")
    wall, load1 = time.monotonic() - t0, os.getloadavg()
    print(suite_markdown(table))
    print(f"{args.n} questions per dataset, {len(rows)} agents, --llm {args.llm}, KB {args.kb_method} "
          f"(built in {built:.0f} s): wall {wall / 60:.1f} min on {os.cpu_count()} CPUs, load average "
          f"{load0[0]:.1f} -> {load1[0]:.1f}; table in {out / 'suite' / 'suite.md'}")
    return 0 if not table.get("unfinished") else 3


if __name__ == "__main__":
    raise SystemExit(main())
