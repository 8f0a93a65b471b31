"""How many correct EviPath paths the gates keep: the gold-data fake (tests/evipath_fakes.CleanGoldLLM,
every sub-answer and the final answer from the annotators' decomposition, so every path is correct)
on MuSiQue training items, φ of Eq. 6 the embedded MiniLM (``--embedder hash``: the tests'
ContentWordEmbedder, no model). Prints the share of correct paths kept, the Eq. 6 fallback and
repair rates, and every rejected path with its reasons.

    PYTHONPATH=src:tests python benchmarks/evipath_keep.py [--limit N] [--embedder minilm|hash]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentrag.synth.evipath import EviPathRunConfig, run_evipath  # noqa: E402
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=None, help="raw MuSiQue training file (default: shared train_397)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    data = Path(os.environ.get("AGENTRAG_SHARED", "../shared")) / "data"
    ds = Path(a.dataset) if a.dataset else data / "musique" / "train_397.jsonl"
    records = [json.loads(x) for x in ds.read_text().splitlines() if x.strip()]
    if a.embedder == "minilm":
        from agentrag.kb.embedders import load_embedder

        embedder = load_embedder()
    else:
        embedder = ContentWordEmbedder()
    out = Path(a.out or tempfile.mkdtemp(prefix="evipath_keep_"))
    cfg = EviPathRunConfig(datasets=[str(ds)], limit=a.limit, concurrency=2, skip_invalid=True)
    m = run_evipath(cfg, out, planner=CleanGoldLLM(records), embedder=embedder)
    gates = [json.loads(x) for x in (out / "gates.jsonl").read_text().splitlines()]
    items = {json.loads(x)["id"]: json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()}
    by_hops: Counter[int] = Counter()
    kept_by_hops: Counter[int] = Counter()
    for g in gates:
        by_hops[g["hops"]] += 1
        kept_by_hops[g["hops"]] += g["passed"]
    kept = sum(g["passed"] for g in gates)
    print(json.dumps({"dataset": ds.name, "embedder": a.embedder, "paths": len(gates), "kept": kept,
                      "kept_share": round(kept / len(gates), 4) if gates else None,
                      "by_hops": {h: f"{kept_by_hops[h]}/{n}" for h, n in sorted(by_hops.items())},
                      "eq6_fallback_rate": m.get("eq6_fallback_rate"), "eq6_repair_rate": m.get("eq6_repair_rate"),
                      "gate_failures": m.get("gate_failures")}))
    for g in gates:
        if not g["passed"]:
            print(json.dumps({"id": g["id"], "question": items[g["id"]]["question"], "reasons": g["reasons"]})[:700])


if __name__ == "__main__":
    main()
