"""ReasonRAG against a remote-like endpoint: 20 questions, an OpenAI-compatible stub answering
each call after 0.2 s, at concurrency 16. Prints calls per question, pairs per question, and wall
time against the ideal (calls x latency / concurrency, or the longest question's chain of
sequential calls if that is longer: a question's calls depend on each other).

    PYTHONPATH=src python benchmarks/reasonrag_stub.py [--questions 20] [--latency 0.2]
        [--concurrency 16] [--set mcts.iterations=64 ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

from agentrag.agents.prompts import FORCE_ANSWER, GROUNDING_SYSTEM
from agentrag.exec import ThreadExecutor
from agentrag.llm import resolve_llm
from agentrag.records import Passage, QAItem
from agentrag.synth.reasonrag import ReasonRagRunConfig, run_reasonrag
from agentrag.testing import FakeRetriever, StubOpenAIServer

GOOD, BAD = "Film Alpha director", "Beta river length"


def reply(body: dict[str, Any]) -> str:
    """A policy that is right only along the branch whose first query is the good one."""
    seed = int(body.get("seed") or 0)
    msgs = body["messages"]
    system, user = msgs[0].get("content") or "", msgs[-1].get("content") or ""
    if system == GROUNDING_SYSTEM:
        ev = "Film Alpha director was John Smith." if "John Smith" in user else "None"
        return f"Based on the query, the relevant evidence is <evidence>{ev}</evidence>"
    history = user.split("\n\n", 1)[1] if "\n\n" in user else ""
    if "John Smith.</evidence>" in history or (FORCE_ANSWER in user and GOOD in history):
        return "So the answer is <answer>John Smith</answer>"
    if "<evidence>" in history or FORCE_ANSWER in user:
        return "So the answer is <answer>Mary Jones</answer>"
    return f"So the next query is <query>{GOOD if seed % 2 == 0 else BAD}</query>"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="a config override key=value")
    args = ap.parse_args()
    raw: dict[str, Any] = {"concurrency": args.concurrency, "mcts": {"top_k": 1}}  # one document: branches differ
    for s in args.sets:
        key, value = s.split("=", 1)
        node = raw
        *path, last = key.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value
    cfg = ReasonRagRunConfig.model_validate(raw)
    questions = [QAItem(id=f"q{i}", question=f"Who directed Film Alpha (case {i})?", golden_answers=["John Smith"])
                 for i in range(args.questions)]
    retriever = FakeRetriever([Passage(id="p1", title="Film Alpha", text="Film Alpha director was John Smith."),
                               Passage(id="p2", title="Beta river", text="The Beta river length is 40 km.")])
    with StubOpenAIServer(reply=reply, latency=args.latency) as srv, tempfile.TemporaryDirectory() as tmp:
        llm = resolve_llm(f"openai:stub@{srv.base_url}", max_retries=0)
        t0 = time.perf_counter()
        m = run_reasonrag(cfg, tmp, llm=llm, retriever=retriever, questions=questions,
                          executor=ThreadExecutor(args.concurrency))
        wall = time.perf_counter() - t0
        calls = srv.requests
    tree_calls = m["llm_calls"]["total"]
    greedy = m["llm_calls"]["greedy_baseline"]
    by_q = m["llm_calls"]["by_question"]
    chain = max(by_q.values()) * args.latency
    ideal = max(calls * args.latency / args.concurrency, chain, 1e-9)
    c = cfg.mcts
    print(f"settings: iterations {c.iterations}, max_children {c.max_children}, max_iter {c.max_iter}, "
          f"rollouts {cfg.value.rollouts}, value {cfg.value.kind}; {args.questions} questions, "
          f"latency {args.latency} s, concurrency {args.concurrency}")
    print(f"calls per question: {tree_calls / args.questions:.1f} (tree: expansions + values; "
          f"min {min(by_q.values())}, max {max(by_q.values())}) + {greedy / args.questions:.1f} greedy baseline")
    print(f"pairs per question: {m['pairs'] / args.questions:.2f} ({m['pairs']} pairs)")
    print(f"backend calls {calls}; wall {wall:.1f} s; ideal {ideal:.1f} s "
          f"(max of calls x latency / concurrency = {calls * args.latency / args.concurrency:.1f} s and the "
          f"longest question chain {chain:.1f} s); wall / ideal = {wall / ideal:.2f}" if args.latency else f"backend calls {calls}; wall {wall:.1f} s (no latency: pure overhead)")


if __name__ == "__main__":
    main()
