"""Synthesis at scale with instant fakes: `eval` and each synthesizer at N items (issue 27, part 3).

For every workload and size N, a fresh subprocess runs the command through its Python entry point
on the scripted fakes of the unit tests (instant LLMs, in-memory retrievers), then runs it again
unchanged (a no-op rerun: every item is done). It prints, per (workload, N): the run's wall time
and time per item, the time of the report (statistics + metrics + rendering, summed over the
functions that build it), the no-op rerun's time and its share of the run, the peak RSS of the
process (and the peak when the report started: the difference is what the report adds), and the
files the no-op rerun rewrote (content hash or mtime changed). At the end, the
growth exponent of the wall time between the two largest sizes (1.0 = time per item flat).

    PYTHONPATH=src python benchmarks/synth_scale.py                       # 250,500,1000 (a few minutes)
    PYTHONPATH=src python benchmarks/synth_scale.py --sizes 1000,5000,20000 --workloads evipath

The fakes: eval (plan-step agent, scripted policy and judge), RAGShaper (the curator/teacher world
of tests/unit/test_ragshaper_support.py, one seed entity per item), EviPath (the shared MuSiQue
training records replicated with new ids, CleanGoldLLM), ReasonRAG (a 2-passage world, small MCTS
budget), Tracer (the 4-hop world, the Amherst passage copied per item).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import IndexedRetriever  # FakeRetriever's ranking, indexed (benchmarks/_shared.py)

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("eval", "ragshaper", "evipath", "reasonrag", "tracer")
# the functions that build each report: their time is summed as "report_s"
REPORT_FUNCS: dict[str, list[tuple[str, str]]] = {
    "eval": [("agentrag.eval.run", "summarize"), ("agentrag.eval.run", "write_eval_report")],
    "ragshaper": [("agentrag.synth.ragshaper.analysis", "stage_counts"), ("agentrag.synth.ragshaper.analysis", "details")],
    "evipath": [("agentrag.synth.evipath.run", "statistics")],
    "reasonrag": [("agentrag.synth.reasonrag.run", "run_statistics")],
    "tracer": [("agentrag.synth.tracer.pipeline", "tracer_counts")],
    "driver": [("agentrag.synth.driver", "finish_run"),  # metrics.json + report of every synthesizer
               ("agentrag.runs", "RunDir.derived")],  # after the fix: statistics + exports of a synthesizer
}


# ----------------------------------------------------------------------------- workloads (child)

def _eval(out: Path, n: int) -> None:
    from test_eval_outages import PASSAGES, plan_step_policy

    from agentrag.eval.judge import LLMJudge
    from agentrag.eval.run import run_eval
    from agentrag.eval.runner import EvalConfig
    from agentrag.testing import FakeRetriever, ScriptedLLM

    data = out.parent / "qa.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?",
                                            "golden_answers": [f"City {i}"]}) + "\n" for i in range(n)))
    cfg = EvalConfig(dataset=str(data), agent="plan_step", concurrency=4)
    run_eval(cfg, out, llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES),
             judge=LLMJudge(ScriptedLLM(default='{"reason": "same", "score": 2}')))


def _ragshaper(out: Path, n: int) -> None:
    from test_ragshaper_support import curator_llm, main_retriever, teacher_llm

    from agentrag.synth.ragshaper import RagShaperRunConfig, run_ragshaper
    from agentrag.synth.ragshaper.components import RagShaperComponents

    comps = RagShaperComponents(curator=curator_llm(), teacher=teacher_llm(), main_kb=main_retriever(),
                                distractor_kb=lambda ps: IndexedRetriever(ps, kb="distractor", max_df=64), tagger=curator_llm())
    cfg = RagShaperRunConfig(concurrency=4)
    cfg.curator.max_depth = 4
    run_ragshaper(cfg, out, seeds=[f"Ada Varn {i}" for i in range(n)], components=comps)


def _evipath(out: Path, n: int) -> None:
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

    data = out.parent / "musique.jsonl"
    shared = Path(os.environ.get("AGENTRAG_SHARED", ROOT.parent / "shared")) / "data" / "musique" / "train_397.jsonl"
    base = [json.loads(x) for x in shared.read_text().splitlines()]
    recs = [{**base[i % len(base)], "id": f"{base[i % len(base)]['id']}~{i}"} for i in range(n)]
    if not data.exists():  # line by line: the joined text of 20,000 items was ~0.5 GB of the peak RSS
        with data.open("w") as fh:
            for r in recs:
                fh.write(json.dumps(r) + "\n")
    run_evipath(EviPathRunConfig(datasets=[str(data)], concurrency=4), out, planner=CleanGoldLLM(recs),
                embedder=ContentWordEmbedder())


def _reasonrag(out: Path, n: int) -> None:
    from test_reasonrag_pipeline import policy, retriever

    from agentrag.records import QAItem
    from agentrag.synth.reasonrag import ReasonRagRunConfig, run_reasonrag
    from agentrag.testing import ScriptedLLM

    cfg = ReasonRagRunConfig.model_validate({"concurrency": 4, "mcts": {"iterations": 4, "max_children": 2,
                                                                        "max_iter": 3, "top_k": 1},
                                             "value": {"rollouts": 1}})
    qs = [QAItem(id=f"q{i}", question=f"Who directed Film Alpha (case {i})?", golden_answers=["John Smith"])
          for i in range(n)]
    run_reasonrag(cfg, out, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=qs)


def _tracer(out: Path, n: int) -> None:
    from tracer_support import PASSAGES, judge_llm, world_llm

    from agentrag.synth.tracer import TracerRunConfig, run_tracer
    from agentrag.testing import FakeRetriever

    amherst = PASSAGES[0]
    copies = [amherst.model_copy(update={"id": f"{amherst.id}-{i}"}) for i in range(n - 4)]
    excl = out.parent / "excluded_titles.txt"  # the same file on the rerun (the same config)
    excl.write_text("Excluded Title\n", encoding="utf-8")
    cfg = TracerRunConfig(docs=n, max_hops=4, concurrency=4, exclude=[str(excl)])
    cfg.sampling.min_chars = 0
    run_tracer(cfg, out, llm=world_llm(), judge=judge_llm(), kb=FakeRetriever(PASSAGES),
               passages=[*PASSAGES[:4], *copies])


RUNNERS: dict[str, Callable[[Path, int], None]] = {"eval": _eval, "ragshaper": _ragshaper, "evipath": _evipath,
                                                  "reasonrag": _reasonrag, "tracer": _tracer}


def _snapshot(run: Path) -> dict[str, tuple[int, str]]:
    """``{relative path: (mtime_ns, sha1)}`` of every file of the run directory (hashed in chunks:
    reading a file whole would put the benchmark's own memory, hundreds of MB at 20,000 EviPath
    items, into the peak RSS it reports)."""
    out = {}
    for p in sorted(run.rglob("*")):
        if p.is_file() and p.name != ".agentrag.lock":
            with open(p, "rb") as fh:
                digest = hashlib.file_digest(fh, "sha1").hexdigest()
            out[str(p.relative_to(run))] = (p.stat().st_mtime_ns, digest)
    return out


def _timed(spent: dict[str, float]) -> None:
    """Wrap the report-building functions of every workload so their time adds up in ``spent``."""
    import importlib

    for name, funcs in REPORT_FUNCS.items():
        for mod_name, attr in funcs:
            try:
                mod = importlib.import_module(mod_name)
            except ImportError:
                continue
            owner: Any = mod
            *path, last = attr.split(".")
            for part in path:
                owner = getattr(owner, part, None)
            fn = getattr(owner, last, None)
            if fn is None:
                continue

            def wrapped(*a: Any, _fn: Any = fn, **kw: Any) -> Any:
                spent.setdefault("rss_at_report", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
                spent["depth"] += 1  # nested report functions count once
                t0 = time.perf_counter()
                try:
                    return _fn(*a, **kw)
                finally:
                    spent["depth"] -= 1
                    if not spent["depth"]:
                        spent["report"] += time.perf_counter() - t0
            setattr(owner, last, wrapped)
        del name


def _no_request_log() -> None:
    """Every ScriptedLLM this process builds keeps no request log (``record=False``): at 20,000
    items the fakes' logs of every prompt would be most of the peak RSS, which is the pipeline's
    to measure. ``--keep-request-log`` measures with the logs, as the unit tests build them."""
    from agentrag import testing

    init = testing.ScriptedLLM.__init__

    def quiet(self: Any, *a: Any, **kw: Any) -> None:
        kw.setdefault("record", False)
        init(self, *a, **kw)

    testing.ScriptedLLM.__init__ = quiet  # type: ignore[method-assign]


def child(workload: str, n: int, out: Path, keep_log: bool = False) -> dict[str, Any]:
    """One size of one workload in this (fresh) process: the run, then a no-op rerun."""
    import logging

    logging.disable(logging.WARNING)
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "unit")]
    spent: dict[str, float] = {"report": 0.0, "depth": 0}
    if not keep_log:
        _no_request_log()
    _timed(spent)
    t0 = time.perf_counter()
    RUNNERS[workload](out, n)
    wall = time.perf_counter() - t0
    report = spent["report"]
    rss_at_report = spent.get("rss_at_report", 0.0)
    before = _snapshot(out)
    time.sleep(0.02)  # a rewrite shows in the mtime
    spent["report"] = 0.0
    t1 = time.perf_counter()
    RUNNERS[workload](out, n)
    rerun = time.perf_counter() - t1
    after = _snapshot(out)
    rewritten = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return {"workload": workload, "items": n, "wall_s": round(wall, 2), "ms_per_item": round(1000 * wall / n, 2),
            "report_s": round(report, 2), "rerun_s": round(rerun, 2), "rerun_share": round(rerun / wall, 3),
            "rerun_report_s": round(spent["report"], 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "peak_rss_before_report_mb": round(rss_at_report, 1),
            "run_dir_mb": round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20, 1),
            "rewritten": rewritten}


# ----------------------------------------------------------------------------- driver (parent)

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250,500,1000", help="item counts, comma-separated")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--child", nargs=3, metavar=("WORKLOAD", "N", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per (workload, size)")
    ap.add_argument("--keep-request-log", action="store_true",
                    help="the scripted fakes keep every request, as in the unit tests (memory grows with N)")
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.child[0], int(a.child[1]), Path(a.child[2]), a.keep_request_log)))
        return
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"# load: {os.getloadavg()}; sizes {sizes}; request logs {'kept' if a.keep_request_log else 'off'}",
          flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for w in a.workloads.split(","):
        rows = []
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix=f"synth_scale_{w}_") as tmp:
                try:
                    cmd = [sys.executable, __file__, "--child", w, str(n), str(Path(tmp) / "run")]
                    proc = subprocess.run(cmd + ["--keep-request-log"] * a.keep_request_log,
                                          capture_output=True, text=True, env=env, timeout=a.timeout)
                except subprocess.TimeoutExpired:
                    print(json.dumps({"workload": w, "items": n, "error": f"timeout {a.timeout} s"}), flush=True)
                    break
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(json.dumps({"workload": w, "items": n, "error": proc.stderr[-2000:]}), flush=True)
                break
            row = json.loads(line[7:])
            rows.append(row)
            print(json.dumps(row), flush=True)
        if len(rows) >= 2:
            (n1, t1), (n2, t2) = [(r["items"], r["wall_s"]) for r in rows[-2:]]
            m1, m2 = rows[-2]["peak_rss_mb"], rows[-1]["peak_rss_mb"]
            print(json.dumps({"workload": w, "growth_exponent": round(math.log(t2 / t1) / math.log(n2 / n1), 2),
                              "rss_mb_per_1000_items": round(1000 * (m2 - m1) / (n2 - n1), 1)}), flush=True)


if __name__ == "__main__":
    main()
