"""Benchmark: the closed loop (scripts/loop.sh) at a size that fits a 2-core CPU: ONE table with every
arm's rows (react, standard_rag, EviPath's planner_executor, ReasonRAG's reason_ground SFT and DPO), the
paired comparisons with bootstrap CIs, the data funnels, the trainings, and the wall time and load of
every step, all read from the run's files (docs/loop.md).

    python benchmarks/loop.py [--out runs/bench_loop] [--size SIZE] [--table-only]

The sizes are fixed here, before any result is seen; the evaluation questions are never used for training
or for choosing them. ``--table-only`` prints the table of a finished (or partial) run without running it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: the held-out set H of docs/loop.md (fixed before any run of the loop's second pass)
HELDOUT_H = "2wiki:86-125 hotpotqa:161-200 musique:61-100"

SIZES = {
    "full": {"ARMS": "react", "N_MUSIQUE": "200", "N_2WIKI": "300", "N_DEV": "40", "TRAIN_STEPS": "-1",
             "BATCH": "2", "MAX_LENGTH": "2048", "LR": "5e-5", "AGENT_STEPS": "6", "MAX_TOKENS": "128",
             "KB_METHOD": "hybrid"},
    # "heldout" (fixed 2026-11-25 before its run): dev questions 16-45, which no run had looked at
    # (the small size's 15 were read to diagnose it), and a per-type quota of 2Wiki training records
    # (the first 60 hold 12 bridge_comparison of 60; the dev file's types are ~1/3 each)
    "heldout": {"ARMS": "react", "N_MUSIQUE": "40", "WIKI_PER_TYPE": "25", "N_DEV": "30", "DEV_SKIP": "15",
                "TRAIN_STEPS": "60", "BATCH": "1", "MAX_LENGTH": "2048", "LR": "1e-4", "AGENT_STEPS": "6",
                "MAX_TOKENS": "96", "KB_METHOD": "bm25"},
    "small": {"ARMS": "react", "N_MUSIQUE": "60", "N_2WIKI": "60", "N_DEV": "15", "TRAIN_STEPS": "40", "BATCH": "1",
              "MAX_LENGTH": "2048", "LR": "1e-4", "AGENT_STEPS": "6", "MAX_TOKENS": "96", "KB_METHOD": "bm25"},
    # "arms-small" (fixed 2026-11-27 before its run): the three arms end to end at the smallest size that
    # runs every step on a loaded 2-core machine (a plumbing check, not a measurement). Training: 10 MuSiQue
    # + 3 2Wiki records per type; 6 react SFT steps (the other SFTs: the same token budget); MCTS on the first
    # question of each training slice, 3 iterations; 3 DPO steps. Evaluation: the first question of each
    # evaluation file (not in H nor in the reserve R of docs/loop.md)
    "arms-small": {"ARMS": "react evipath reasonrag", "N_MUSIQUE": "10", "WIKI_PER_TYPE": "3", "TRAIN_STEPS": "6",
                   "BATCH": "1", "MAX_LENGTH": "2048", "LR": "1e-4", "AGENT_STEPS": "6", "MAX_TOKENS": "96",
                   "KB_METHOD": "bm25", "EVAL_SLICES": "2wiki:1-1 hotpotqa:1-1 musique:1-1", "RR_PER_FILE": "1",
                   "RR_ITERATIONS": "3", "DPO_STEPS": "3"},
    # "arms-heldout" (fixed 2026-11-27 before any run): the three arms on the held-out set H (120
    # questions). Training as the "heldout" size (40 MuSiQue + 25 2Wiki per type), one epoch of react SFT;
    # MCTS on the first 10 questions of each training slice, 8 iterations; one DPO epoch
    "arms-heldout": {"ARMS": "react evipath reasonrag", "N_MUSIQUE": "40", "WIKI_PER_TYPE": "25",
                     "TRAIN_STEPS": "-1", "BATCH": "1", "MAX_LENGTH": "2048", "LR": "1e-4", "AGENT_STEPS": "6",
                     "MAX_TOKENS": "96", "KB_METHOD": "bm25", "EVAL_SLICES": HELDOUT_H, "RR_PER_FILE": "10",
                     "RR_ITERATIONS": "8", "DPO_STEPS": "-1"},
}

#: (arm, agent, model, eval run prefix, training directory or None for the base model)
MODEL_ROWS = (
    ("react", "react", "base", "react_base", None),
    ("react", "react", "react SFT", "react_sft", "train"),
    ("react", "standard_rag", "base", "srag_base", None),
    ("react", "standard_rag", "react SFT", "srag_sft", "train"),
    ("evipath", "planner_executor", "base", "pe_base", None),
    ("evipath", "planner_executor", "PE SFT", "pe_sft", "train_pe"),
    ("reasonrag", "reason_ground", "RG SFT", "rg_sft", "train_rg"),
    ("reasonrag", "reason_ground", "RG SFT + DPO", "rg_dpo", "train_dpo"),
)
#: (compare file, what it compares)
COMPARISONS = (
    ("react", "react: react SFT - base"),
    ("standard_rag", "standard_rag: react SFT - base"),
    ("pe", "EviPath: PE SFT - base (planner_executor)"),
    ("pe_vs_react", "EviPath: PE SFT (planner_executor) - react SFT (react), same items and token budget"),
    ("dpo", "ReasonRAG: RG SFT + DPO - RG SFT (reason_ground)"),
)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _f(x: Any, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def eval_datasets(out: Path) -> list[str]:
    return sorted(p.name[len("eval_"):-len(".jsonl")] for p in (out / "data").glob("eval_*.jsonl"))


def _backend(run: Path, out: Path) -> str:
    """The ``--llm`` an evaluation ran with (its resolved config), relative to the loop's directory."""
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")) if (run / "config.yaml").is_file() else {}
    llm = str((cfg or {}).get("llm", "?"))
    return llm.replace(f"{out}/", "OUT/").replace(f"{out.resolve()}/", "OUT/")


def model_rows(out: Path) -> list[list[str]]:
    from agentrag.eval.compare import load_results, summary

    rows = []
    for arm, agent, model, prefix, _train in MODEL_ROWS:
        runs = [out / "eval" / f"{prefix}_{ds}" for ds in eval_datasets(out)]
        if not runs or not all((r / "results.jsonl").is_file() for r in runs):
            continue
        s = summary(list(load_results(",".join(map(str, runs))).values()))
        metrics = [_json(r / "metrics.json") or {} for r in runs]
        backend = " / ".join(sorted({_backend(r, out) for r in runs}))
        wall = sum(float(m.get("wall_s") or 0) for m in metrics)
        rows.append([arm, agent, model, backend, str(s["n"]), _f(s["em"]), _f(s["f1"]), _f(s["recall"]),
                     _f(s["answered_rate"]), _f(s["protocol_error_rate"]), _f(s["steps"], 1), f"{wall / 60:.1f}"])
    return rows


def comparison_rows(out: Path) -> list[list[str]]:
    rows = []
    for name, what in COMPARISONS:
        res = _json(out / "compare" / f"{name}.json")
        if res is None:
            continue
        f1, em = res["f1_diff"], res["em_diff"]
        per = "; ".join(f"{ds} {d['f1_diff']['mean']:+.3f} [{d['f1_diff']['ci95'][0]:+.3f}, "
                        f"{d['f1_diff']['ci95'][1]:+.3f}] (n={d['n']})" for ds, d in res["per_dataset"].items())
        rows.append([what, str(res["n_paired"]), f"{f1['mean']:+.3f} [{f1['ci95'][0]:+.3f}, {f1['ci95'][1]:+.3f}]",
                     f"{em['mean']:+.3f} [{em['ci95'][0]:+.3f}, {em['ci95'][1]:+.3f}]", per])
    return rows


def funnel_text(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "-"
    parts = []
    for r in metrics.get("funnel", []):
        rej = ", ".join(f"{k} {v}" for k, v in r.get("rejected", {}).items())
        parts.append(f"{r['stage']} {r['in']}->{r['out']}" + (f" ({rej})" if rej else ""))
    return "; ".join(parts)


def training_rows(out: Path) -> list[list[str]]:
    rows = []
    for name, what, budget in (("train", "react SFT", None), ("train_pe", "PE SFT", "planner_executor"),
                               ("train_rg", "RG SFT", "reason_ground"), ("train_dpo", "DPO on RG SFT", None)):
        m = _json(out / name / "metrics.json")
        if m is None:
            continue
        b = _json(out / f"budget_{budget}.json") if budget else None
        epochs = b["epochs"]["data"] if b else None
        if name == "train":  # the reference of the matched budgets
            ref = _json(out / "budget_planner_executor.json") or _json(out / "budget_reason_ground.json")
            b, epochs = ref, (ref["epochs"]["reference"] if ref else None)
        rows.append([what, str(m.get("records")), str(m.get("global_step")), str(m.get("tokens", "-")),
                     str(m.get("trained_tokens", "-")), _f(epochs, 2) if epochs is not None else "-",
                     str(b["token_budget"]) if b else "-", _f(m.get("final_loss")),
                     f"{float(m.get('train_seconds') or 0) / 60:.1f}"])
    return rows


def step_rows(out: Path) -> list[list[str]]:
    """Wall time and load average of every step of the last invocation (OUT/steps.log)."""
    log = out / "steps.log"
    if not log.is_file():
        return []
    lines = [ln.split(" ", 2) for ln in log.read_text(encoding="utf-8").splitlines() if ln.count(" ") >= 2]
    starts = [i for i, ln in enumerate(lines) if ln[2].startswith("start:")]
    last = lines[starts[-1]:] if starts else lines
    rows = []
    for a, b in zip(last, last[1:], strict=False):
        rows.append([a[2][:70], f"{(int(b[0]) - int(a[0])) / 60:.1f}", a[1]])
    if last:
        rows.append([last[-1][2][:70], "-", last[-1][1]])
    return rows


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def table(out: Path) -> str:
    teacher, rr = _json(out / "synth" / "metrics.json"), _json(out / "rr" / "metrics.json")
    export = (teacher or {}).get("export", {})
    parts = ["Models (pooled over the evaluation datasets: " + ", ".join(eval_datasets(out)) + "; greedy):", "",
             md_table(["arm", "agent", "model", "backend", "n", "EM", "F1", "gold recall", "answered",
                       "protocol err", "retrievals", "eval min"], model_rows(out)), "",
             "Comparisons (paired by question; percentile bootstrap 95% CI, 2000 resamples, seed 0):", "",
             md_table(["comparison", "n", "F1 diff [95% CI]", "EM diff [95% CI]", "per dataset F1 diff"],
                      comparison_rows(out)), "",
             "Data (each synthesizer's funnel, gates included):", "",
             md_table(["data", "funnel", "records"], [
                 ["teacher (synth annotated)", funnel_text(teacher),
                  f"react {export.get('exported', '-')}, planner_executor "
                  f"{(export.get('planner_executor') or {}).get('exported', '-')} (paths left out by EviPath's "
                  f"gates: {(export.get('planner_executor') or {}).get('dropped') or 0}), reason_ground "
                  f"{(export.get('reason_ground') or {}).get('exported', '-')}"],
                 ["MCTS (synth reasonrag)", funnel_text(rr),
                  f"pairs {((rr or {}).get('export') or {}).get('pairs', (rr or {}).get('pairs', '-'))}"]]), "",
             "Trainings:", "",
             md_table(["model", "records", "steps", "data tokens", "data assistant tokens", "epochs",
                       "tokens seen (steps x batch x mean)", "final loss", "min"], training_rows(out)), "",
             "Steps (wall time, load average at the step's start):", "",
             md_table(["step", "min", "load"], step_rows(out))]
    return "\n".join(parts) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/bench_loop")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--table-only", action="store_true", help="print the table of an existing run directory")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    out = Path(args.out)
    if args.table_only:
        sys.stdout.write(table(out))
        return 0
    env = {**os.environ, **SIZES[args.size]}
    env.setdefault("AG", f"{sys.executable} -m agentrag")
    env.setdefault("PY", sys.executable)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    load0, t0 = os.getloadavg(), time.monotonic()
    subprocess.run(["bash", str(root / "scripts" / "loop.sh"), args.out], check=True, env=env, cwd=root)
    wall, load1 = time.monotonic() - t0, os.getloadavg()
    text = table(out)
    (out / "table.md").write_text(text, encoding="utf-8")
    summary = {"size": args.size, "params": SIZES[args.size], "wall_s": round(wall, 1), "cpus": os.cpu_count(),
               "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in load1]}
    (out / "bench.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(text)
    print(f"size {args.size}: wall {wall / 60:.1f} min on {os.cpu_count()} CPUs, load average {load0[0]:.1f} -> "
          f"{load1[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
