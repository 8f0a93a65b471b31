#!/usr/bin/env bash
# The main job on embedded defaults; grows as pipelines land. Usage: scripts/demo.sh OUT_DIR
set -euo pipefail
OUT=${1:-runs/demo}
AG=".venv/bin/agentrag"
mkdir -p "$OUT"
$AG version
# --- KB step (owner: kb area): build the KB over the shared multi-hop contexts once, reuse it after ---
SHARED_DATA="${AGENTRAG_SHARED:-../shared}/data"
KB_DIR="${KB_DIR:-$OUT/../kb}"
if [ ! -f "$KB_DIR/params.json" ]; then
  $AG kb build "$SHARED_DATA/hotpotqa/dev_distractor_200.jsonl" "$SHARED_DATA/hotpotqa/train_distractor_100.jsonl" \
    "$SHARED_DATA/2wikimultihopqa/dev_with_context_164.jsonl" "$SHARED_DATA/musique/train_100.jsonl" --out "$KB_DIR"
fi
$AG kb stats "$KB_DIR"
$AG kb search "$KB_DIR" "Which band did Jeff Porcaro play drums for?" -k 3
# --- end of KB step ---
echo
echo "demo outputs are under: $OUT"
