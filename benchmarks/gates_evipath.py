"""EviPath's and the annotated teacher's rows of the gate benchmark alone (the full run,
``benchmarks/gates.py``, scores every synthesizer): one row per gate x family with the label
verifier, and the lexical-only recall and false-rejection rate beside it.

    PYTHONPATH=src AGENTRAG_SHARED=../shared .venv/bin/python benchmarks/gates_evipath.py train|dev
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gatebench.synth_annotated as annotated  # noqa: E402
import gatebench.synth_evipath as evipath  # noqa: E402
from gatebench.cases import score  # noqa: E402
from gatebench.families import generate  # noqa: E402
from gatebench.sources import load_items  # noqa: E402


def main(split: str) -> None:
    t0 = time.time()
    gates = evipath.GATES + annotated.GATES
    cases = generate(load_items(split), seed=0)
    rows = score(gates, cases, verifier=True)
    lexical = {(r["synth"], r["gate"], r["family"]): r for r in score(gates, cases, verifier=False)}
    print(f"split={split} cases={len(cases)} seconds={time.time() - t0:.0f}")
    print("| synth | gate | family | cases | recall | false rej. | lexical recall | lexical false rej. |")
    print("|---|---|---|---|---|---|---|---|")
    below = 0
    for r in rows:
        lex = lexical[(r["synth"], r["gate"], r["family"])]
        ok = r["recall"] >= 0.95 and r["false_rejection"] <= 0.05
        below += not ok
        print(f"| {r['synth']} | {r['gate']} | {r['family']} | {r['cases']} | {r['recall']:.3f} | "
              f"{r['false_rejection']:.3f}{'' if ok else ' **below**'} | {lex['recall']:.3f} | "
              f"{lex['false_rejection']:.3f} |")
    print(f"rows below 95/95 with the verifier: {below} of {len(rows)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dev")
