"""Acceptance check of an ``agentrag synth annotated`` run: reads the run's exported records and
prints its funnel and three counts.

1. react SFT (``sft/trl_sft.jsonl``): kept paths, and kept paths where some hop's annotated answer
   is missing (through :func:`agentrag.match.mentions`, as the gates match) from the observation the
   agent saw before the turn that uses it (the "Found: X" thought of the next search, or the final
   answer turn after the last search). Must be 0.
2. planner_executor (``sft_planner_executor/trl_sft.jsonl``): planner conversations, with their
   executor conversations, parsed with the agent's protocol into EviPath's stage records and run
   through EviPath's own gates (:func:`agentrag.synth.evipath.gates.check_path`, lexical) against
   the raw items (``--dataset``). Must all pass.
3. ``--sample`` rewritten sub-questions (a seeded sample of the run's searched hops) with the
   naturalness rule (:func:`agentrag.synth.annotated.questions.is_natural`) per question.

    PYTHONPATH=src python benchmarks/annotated_check.py RUN_DIR --dataset MUSIQUE.jsonl \
        --dataset 2WIKI.jsonl [--sample 100 --seed 0] [--out benchmarks/results/annotated_subquestions.txt]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM, parse_planner
from agentrag.match import demonyms, mentions
from agentrag.synth.annotated.pe import evipath_records
from agentrag.synth.annotated.questions import is_natural
from agentrag.synth.evipath.config import GateConfig
from agentrag.synth.evipath.gates import check_path
from agentrag.synth.evipath.inputs import iter_items
from agentrag.synth.evipath.schema import EviItem


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def react_check(run: Path) -> tuple[int, list[str]]:
    """(kept paths, problems): each problem names a path and the hop whose answer its observation
    does not show."""
    paths = {r["trajectory"]["question"]: r for r in _jsonl(run / "paths.jsonl") if r.get("kept")}
    rows = _jsonl(run / "sft" / "trl_sft.jsonl")
    problems = []
    for row in rows:
        msgs = row["messages"]
        question = next(m["content"] for m in msgs if m["role"] == "user")
        rec = paths.get(question)
        if rec is None:
            problems.append(f"{question!r}: exported but not a kept path of paths.jsonl")
            continue
        answers = rec["detail"]["answers"]
        queries = [c["function"]["arguments"]["query"] for m in msgs if m["role"] == "assistant"
                   for c in m.get("tool_calls") or []]
        if queries != rec["detail"]["queries"]:
            problems.append(f"{rec['id']}: exported searches {queries} differ from the path's")
            continue
        observations = [m["content"] for m in msgs if m["role"] == "tool"]
        thoughts = [m["content"] for m in msgs if m["role"] == "assistant"][1:]  # after each observation
        for i, (ans, obs) in enumerate(zip(answers, observations, strict=True)):
            if not mentions(ans, obs, demonyms(ans)):
                problems.append(f"{rec['id']}: hop {i + 1} answer {ans!r} not in the observation before "
                                f"{thoughts[i][:60]!r}")
                break
    return len(rows), problems




def pe_check(run: Path, datasets: list[str]) -> tuple[int, Counter[str], list[str]]:
    """(planner conversations, failed gates by name, one line per failing conversation)."""
    items: dict[str, EviItem] = {}
    for d in datasets:
        for it in iter_items(d, skip_invalid=True):
            items.setdefault(it.question, it)
    chats = [r["messages"] for r in _jsonl(run / "sft_planner_executor" / "trl_sft.jsonl")]
    planners = [c for c in chats if c[0]["content"] == PLANNER_SYSTEM]
    execs = [c for c in chats if c[0]["content"] == EXECUTOR_SYSTEM]
    failed: Counter[str] = Counter()
    lines = []
    for chat in planners:
        item = items[chat[1]["content"].removeprefix("Question: ")]
        searches = [s for m in chat if m["role"] == "assistant" for s in parse_planner(m["content"]).searches]
        mine = [next(e for e in execs if e[1]["content"].startswith(f"Question: {q}\n")) for q in searches]
        plan, its, sels = evipath_records(chat, mine, item.id)
        g = check_path(item, plan, its, sels, GateConfig())
        if not g.passed:
            failed.update(k for k, ok in g.checks.items() if not ok)
            lines.append(f"{item.id}: {'; '.join(g.reasons)[:300]}")
    return len(planners), failed, lines


def sample_questions(run: Path, n: int, seed: int) -> list[tuple[str, str, str | None]]:
    """(source, sub-question, naturalness problem or None) of ``n`` searched hops of the run."""
    hops = [(r.get("source", ""), q) for r in _jsonl(run / "paths.jsonl") for q in (r.get("detail") or {}).get(
        "queries", [])]
    picked = random.Random(seed).sample(hops, min(n, len(hops)))
    return [(src, q, is_natural(q)) for src, q in picked]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--dataset", action="append", default=[], help="the raw files the run read (for EviPath's gates)")
    ap.add_argument("--sample", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the sub-question sample here too")
    a = ap.parse_args()
    metrics = json.loads((a.run / "metrics.json").read_text(encoding="utf-8"))
    print("funnel:")
    for row in metrics["funnel"]:
        rej = ", ".join(f"{k}: {v}" for k, v in row["rejected"].items())
        print(f"  {row['stage']:<8} {row['in']:>5} -> {row['out']:<5} {rej}")
    kept, problems = react_check(a.run)
    print(f"react SFT: {kept} kept paths; {len(problems)} with a hop answer missing from the observation shown")
    for p in problems[:20]:
        print("  " + p)
    ok = not problems
    if a.dataset:
        n, failed, lines = pe_check(a.run, a.dataset)
        print(f"planner_executor: {n - len(lines)} of {n} planner conversations pass EviPath's gates"
              + (f"; failed gates: {dict(failed)}" if failed else ""))
        for line in lines[:20]:
            print("  " + line)
        ok = ok and not lines
    sample = sample_questions(a.run, a.sample, a.seed)
    natural = sum(why is None for _, _, why in sample)
    out = [f"{len(sample)} sub-questions sampled (seed {a.seed}) from {a.run / 'paths.jsonl'}: "
           f"{natural} natural by the rules of agentrag.synth.annotated.questions.is_natural",
           f"command: python {' '.join(sys.argv)}", ""]
    out += [f"{'ok' if why is None else 'NOT NATURAL (' + why + ')':<12} [{src}] {q}" for src, q, why in sample]
    print("\n".join(out[:1]))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text("\n".join(out) + "\n", encoding="utf-8")
        print(f"sample: {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
