"""Pick RAGShaper's Eq. 4 threshold tau for an embedder: dense scores of question vs gold
supporting passage (relevant) and question vs random passage (random) on a KB built from a raw
multi-hop file, and the share of each kept at several tau (docs/ragshaper.md).

    python benchmarks/ragshaper_tau.py KB_DIR RAW_FILE  (e.g. ../shared/data/hotpotqa/train_distractor_100.jsonl)
"""

from __future__ import annotations

import json
import random
import sys

import numpy as np

from agentrag.kb import KnowledgeBase


def main(kb_dir: str, raw: str) -> None:
    kb = KnowledgeBase.load(kb_dir)
    questions = {}
    with open(raw, encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            questions[obj.get("_id") or obj.get("id")] = obj["question"]
    ids = [p.id for p in kb.passages()]
    rng = random.Random(0)
    rel: list[float] = []
    rnd: list[float] = []
    for qid, gold in kb.gold().items():
        if qid not in questions:
            continue
        score = {h.id: h.score for h in kb.search([questions[qid]], len(ids), method="dense")[0]}
        rel += [score[g] for g in gold if g in score]
        rnd += [score[i] for i in rng.sample(ids, 10) if i in score and i not in gold]
    r, n = np.array(rel), np.array(rnd)
    print(f"relevant n={len(r)} mean={r.mean():.3f} p10={np.percentile(r, 10):.3f} median={np.median(r):.3f}")
    print(f"random   n={len(n)} mean={n.mean():.3f} p90={np.percentile(n, 90):.3f} p99={np.percentile(n, 99):.3f}")
    for tau in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8):
        print(f"tau={tau}: keeps {100 * (r > tau).mean():5.1f}% of relevant, {100 * (n > tau).mean():5.1f}% of random")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
