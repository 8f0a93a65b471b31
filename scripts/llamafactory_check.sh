#!/usr/bin/env bash
# Load every agentrag export kind with LLaMA-Factory's own loader (issue 25); see docs/export.md.
#
#   scripts/llamafactory_check.sh [WORK_DIR]      (default /tmp/lfcheck)
#
# LF_VENV (default /tmp/lf-venv): a scratch venv, made and filled on first use with
# llamafactory==$LF_VERSION (default 0.9.5) and the CPU torch of constraints.txt. PyPI's
# torchvision/torchaudio wheels are CUDA builds that cannot load against a CPU torch; text data
# never uses them, so they are uninstalled again (the check gives LLaMA-Factory an empty
# torchaudio module). PYTHON: agentrag's interpreter (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/lfcheck}
LF_VENV=${LF_VENV:-/tmp/lf-venv}
LF_VERSION=${LF_VERSION:-0.9.5}
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3

if ! "$LF_VENV/bin/python" -c "import llamafactory" 2>/dev/null; then
    base=$("$PYTHON" -c "import sys; print(sys.base_prefix)")/bin/python3
    "$base" -m venv "$LF_VENV"
    cons=$(mktemp)
    grep -E '^torch==' constraints.txt > "$cons"
    echo "installing llamafactory==$LF_VERSION into $LF_VENV (log: $LF_VENV/install.log)"
    "$LF_VENV/bin/pip" install -c "$cons" "$(cat "$cons")" "llamafactory==$LF_VERSION" > "$LF_VENV/install.log" 2>&1
    "$LF_VENV/bin/pip" uninstall -y -q torchvision torchaudio >> "$LF_VENV/install.log" 2>&1
    rm -f "$cons"
fi

rm -rf "$WORK"
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" benchmarks/_llamafactory_check.py make "$WORK"
# LLaMA-Factory's own logging goes to WORK/llamafactory.log; the summary to stdout
HF_HUB_OFFLINE=1 "$LF_VENV/bin/python" benchmarks/_llamafactory_check.py load "$WORK" 2> "$WORK/llamafactory.log"
