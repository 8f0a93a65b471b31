#!/usr/bin/env bash
# A newcomer's first minutes on 2 cores (docs/quickstart.md "First ten minutes"), after make setup.
set -euo pipefail
A=${A:-.venv/bin/agentrag}; OUT=${1:-runs/first}; D=${AGENTRAG_SHARED:-../shared}/data
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
lap "done"
