"""Pick RAGShaper's Eq. 4 threshold tau for an embedder: dense scores of question vs gold
supporting passage (relevant) and question vs random passage (random) on a KB built from a raw
multi-hop file, and the share of each kept at several tau (docs/ragshaper.md).

    python benchmarks/ragshaper_tau.py KB_DIR RAW_FILE  (e.g. ../shared/data/hotpotqa/train_distractor_100.jsonl)
    python benchmarks/ragshaper_tau.py                  (the shared HotpotQA train file; its KB is built
                                                          once into /tmp/agentrag_ragshaper_tau_kb)
"""

from __future__ import annotations

import json
import random
import sys

import numpy as np
from _shared import DATA

from agentrag.kb import KnowledgeBase

DEFAULT_RAW = DATA / "hotpotqa" / "train_distractor_100.jsonl"
DEFAULT_KB = "/tmp/agentrag_ragshaper_tau_kb"


def default_kb() -> str:
    """The KB over the default file's pooled contexts (built once, with the default KB settings)."""
    from pathlib import Path

    from agentrag.kb.ingest import gold_passages, read_corpus

    if not (Path(DEFAULT_KB) / "params.json").exists():  # as `agentrag kb build DEFAULT_RAW` does
        KnowledgeBase.build(read_corpus(DEFAULT_RAW, "auto"), DEFAULT_KB, gold=gold_passages(DEFAULT_RAW),
                            overwrite=True, dedupe=True, progress=False)
    return DEFAULT_KB


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
    if len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    elif len(sys.argv) == 1:
        main(default_kb(), str(DEFAULT_RAW))
    else:
        sys.exit(__doc__)
