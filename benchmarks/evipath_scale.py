"""EviPath report/metrics time against the number of items (issue 22: it was quadratic).

Runs the synthesizer once with the gold-data fake (tests/evipath_fakes.CleanGoldLLM) on the shared
MuSiQue training file, then replicates its records (new ids) to N items and times
``report.statistics`` (the metrics) and ``report.sections`` (the report) at each N:

    PYTHONPATH=src python benchmarks/evipath_scale.py [--sizes 1000,2000,5000,10000,20000]

Prints one JSON line per size: seconds in total and per item (flat when linear).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentrag.synth.evipath import (  # noqa: E402
    EviPathRunConfig,
    report,  # noqa: E402
    run_evipath,
)
from agentrag.synth.evipath.schema import (  # noqa: E402
    ConversationRecord,
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder  # noqa: E402

KINDS = {"items": EviItem, "plans": PlanRecord, "iterations": IterationRecord, "sub_answers": SubAnswerRecord,
         "selections": SelectionRecord, "gates": GateRecord, "conversations": ConversationRecord}


def _load(run: Path) -> dict[str, list[Any]]:
    return {k: [cls.model_validate_json(x) for x in (run / f"{k}.jsonl").read_text().splitlines()]
            for k, cls in KINDS.items()}


def _replicate(base: dict[str, list[Any]], n: int) -> dict[str, list[Any]]:
    """``n`` items: copies of the base run's records, item ids suffixed with the copy number."""
    items = base["items"]
    out: dict[str, list[Any]] = {k: [] for k in KINDS}
    for c in range(n // len(items) + 1):
        for k, recs in base.items():
            for r in recs:
                upd: dict[str, Any] = {"id": f"{r.id}~{c}"}
                if hasattr(r, "item_id"):
                    upd["item_id"] = f"{r.item_id}~{c}"
                out[k].append(r.model_copy(update=upd))
    keep = {i.id for i in out["items"][:n]}
    return {k: [r for r in v if getattr(r, "item_id", r.id) in keep] for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000")
    a = ap.parse_args()
    data = Path(os.environ.get("AGENTRAG_SHARED", "../shared")) / "data" / "musique" / "train_397.jsonl"
    records = [json.loads(x) for x in data.read_text().splitlines()]
    run = Path(tempfile.mkdtemp(prefix="evipath_scale_")) / "run"
    run_evipath(EviPathRunConfig(datasets=[str(data)], concurrency=4), run, planner=CleanGoldLLM(records),
                embedder=ContentWordEmbedder())
    base = _load(run)
    for n in (int(x) for x in a.sizes.split(",")):
        r = _replicate(base, n)
        t0 = time.perf_counter()
        counts, details = report.statistics(
            mode="abductive", split="both", items=r["items"], plans=r["plans"], iterations=r["iterations"],
            subs=r["sub_answers"], sels=r["selections"], gates=r["gates"], convs=r["conversations"],
            exported={"exported": 0}, export_roles=("planner", "executor"))
        t1 = time.perf_counter()
        funnel = [{"stage": k, "in": v[0], "out": v[1], "rejected": dict(v[2]), "unfinished": 0}
                  for k, v in counts.items()]
        report.sections({**details, "funnel": funnel, "wall_s": 1.0, "unfinished": 0, "export": {}, "llm": {}},
                        {})
        t2 = time.perf_counter()
        print(json.dumps({"items": n, "records": sum(map(len, r.values())), "statistics_s": round(t1 - t0, 3),
                          "sections_s": round(t2 - t1, 3), "ms_per_item": round(1000 * (t2 - t0) / n, 3)}))


if __name__ == "__main__":
    main()
