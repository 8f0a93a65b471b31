"""The gate benchmark: every gate of every synthesizer scored per family on labeled cases.

    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/gates.py [--split train|dev] [--limit N]

Cases are generated from the shared QA files by the mutation families of
``benchmarks/gatebench/families.py`` (``train``: the training files, where thresholds are chosen;
``dev``: the dev files, where they are reported). Each gate runs twice: with the scripted label
verifier (a stand-in for a strong verifier model) and lexical only (no verifier). Prints one row
per synthesizer x gate x family (cases, precision and recall of the rejections, false-rejection
rate of the valid variants) and writes the rows to benchmarks/results/gates_<split>.jsonl and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gatebench.adapters import all_gates  # noqa: E402
from gatebench.families import generate  # noqa: E402
from gatebench.sources import load_items  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BAR = 0.95


def table(rows_v: list[dict], rows_l: list[dict]) -> list[str]:
    lex = {(r["synth"], r["gate"], r["family"]): r for r in rows_l}
    out = ["| synth | gate | family | cases (adv/valid) | recall | precision | false rej. | lexical recall | lexical false rej. |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows_v:
        lr = lex[(r["synth"], r["gate"], r["family"])]
        flag = "" if r["recall"] >= BAR and r["false_rejection"] <= 1 - BAR else " **below bar**"
        out.append(f"| {r['synth']} | {r['gate']} | {r['family']} | {r['cases']} ({r['adversarial']}/{r['valid']}) | "
                   f"{r['recall']:.3f} | {r['precision']:.3f} | {r['false_rejection']:.3f}{flag} | "
                   f"{lr['recall']:.3f} | {lr['false_rejection']:.3f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("train", "dev"), default="dev")
    ap.add_argument("--limit", type=int, default=None, help="items per source file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-family", type=int, default=None, help="cases per family (default: gatebench's PER_FAMILY)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    t0 = time.time()
    items = load_items(args.split, args.limit)
    cases = generate(items, seed=args.seed, **({"per_family_cap": args.per_family} if args.per_family else {}))
    from gatebench.cases import score
    gates = all_gates()
    rows_v = score(gates, cases, verifier=True)
    rows_l = score(gates, cases, verifier=False)
    load = os.getloadavg()[0]
    lines = [f"# gate benchmark, split {args.split}: {len(items)} items, {len(cases)} cases, "
             f"{len({c.family for c in cases})} families; {time.time() - t0:.1f} s, load {load:.1f}", "",
             *table(rows_v, rows_l)]
    below = [r for r in rows_v if r["recall"] < BAR or r["false_rejection"] > 1 - BAR]
    lines += ["", f"rows below the {BAR:.0%}/{BAR:.0%} bar (with the verifier): {len(below)} of {len(rows_v)}"]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gates_{args.split}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with (out / f"gates_{args.split}.jsonl").open("w", encoding="utf-8") as f:
        for r in rows_v:
            f.write(json.dumps({**r, "verifier": "label"}) + "\n")
        for r in rows_l:
            f.write(json.dumps({**r, "verifier": None}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
