#!/usr/bin/env bash
# A newcomer's first minutes on 2 cores (docs/quickstart.md "First ten minutes"), after make setup.
set -euo pipefail
A=${A:-.venv/bin/agentrag}; PY=${PY:-.venv/bin/python}; OUT=${1:-runs/first}; D=${AGENTRAG_SHARED:-../shared}/data
t0=$(date +%s); lap() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
lap "kb build (BM25 + dense + hybrid over the HotpotQA dev contexts)"
$A kb build "$D/hotpotqa/dev_distractor_200.jsonl" --out "$OUT/kb"
lap "kb search"
$A kb search --kb "$OUT/kb" "Which band did Jeff Porcaro play drums for?" --top-k 3
lap "eval: react agent, embedded model, 3 questions"
$A eval --dataset "$D/hotpotqa/dev_distractor_200.jsonl" --kb "$OUT/kb" --agent react --llm embedded \
  --limit 3 --out "$OUT/eval"
lap "view"
$A view "$OUT/eval"
lap "Python API: the README example (build_kb reuses the KB above, run_eval on an LLM object)"
$PY - "$D/hotpotqa/dev_distractor_200.jsonl" "$OUT" <<'PYEOF'
import sys

from agentrag import build_kb, resolve_llm, run_eval
from agentrag.eval import EvalConfig

data, out = sys.argv[1], sys.argv[2]
kb = build_kb([data], f"{out}/kb", progress=True)  # the same file and options: the KB built above, reused
print(f"KB {out}/kb: {len(kb)} passages, reused: {kb.reused}")
llm = resolve_llm("embedded")
metrics = run_eval(EvalConfig(dataset=data, limit=2), f"{out}/eval_py", llm=llm, retriever=kb,
                   progress=True)  # heartbeat lines on stderr (the default only when interactive)
print({k: metrics[k] for k in ("n", "em", "f1", "unfinished", "wall_s")}, "LLM:", metrics["llm"])
PYEOF
lap "done"
