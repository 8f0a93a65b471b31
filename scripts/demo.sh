#!/usr/bin/env bash
# The main job on embedded defaults; grows as pipelines land. Usage: scripts/demo.sh OUT_DIR
set -euo pipefail
OUT=${1:-runs/demo}
AG=".venv/bin/agentrag"
mkdir -p "$OUT"
$AG version
echo
echo "demo outputs are under: $OUT"
