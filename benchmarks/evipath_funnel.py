"""The EviPath funnel with the gold-data fake (tests/evipath_fakes.CleanGoldLLM) on the shared
MuSiQue and 2WikiMultihopQA training files: items -> plans -> paths -> each gate -> exported.

    PYTHONPATH=src:tests python benchmarks/evipath_funnel.py [--limit N] [--out DIR]

φ is the tests' ContentWordEmbedder (no model download). Prints one JSON line per dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentrag.synth.evipath import EviPathRunConfig, run_evipath  # noqa: E402
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder, twowiki_as_gold  # noqa: E402


def funnel(dataset: Path, records: list[dict], out: Path, limit: int | None) -> dict:
    cfg = EviPathRunConfig(datasets=[str(dataset)], limit=limit, concurrency=4, skip_invalid=True)
    m = run_evipath(cfg, out, planner=CleanGoldLLM(records), embedder=ContentWordEmbedder())
    rows = {r["stage"]: (r["in"], r["out"], r["rejected"]) for r in m["funnel"]}
    return {"dataset": dataset.name, "funnel": rows, "gate_failures": m.get("gate_failures"),
            "conversations_kept": m.get("conversations_kept"), "exported": m["export"].get("exported", 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    data = Path(os.environ.get("AGENTRAG_SHARED", "../shared")) / "data"
    base = Path(a.out or tempfile.mkdtemp(prefix="evipath_funnel_"))
    mus = data / "musique" / "train_100.jsonl"
    wiki = data / "2wikimultihopqa" / "train_600.jsonl"
    mus_recs = [json.loads(x) for x in mus.read_text().splitlines()]
    wiki_recs = [twowiki_as_gold(json.loads(x)) for x in wiki.read_text().splitlines()]
    for ds, recs, name in ((mus, mus_recs, "musique"), (wiki, wiki_recs, "2wiki")):
        print(json.dumps(funnel(ds, recs, base / name, a.limit)))


if __name__ == "__main__":
    main()
