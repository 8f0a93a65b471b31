#!/usr/bin/env bash
# The closed loop on one CPU (docs/loop.md): KB from the shared TRAINING contexts -> human-annotation
# teacher (no LLM) -> SFT of the embedded model -> react eval of the base (embedded) and the trained
# (hf:) model on 2Wiki DEV questions never used for training -> before/after table with a bootstrap CI.
# Usage: scripts/loop.sh OUT_DIR. Sizes by environment (defaults: the full loop of docs/loop.md):
#   N_MUSIQUE, N_2WIKI (training records read), N_DEV (dev questions), DEV_SKIP (dev questions skipped
#   first: a slice no earlier run looked at), WIKI_PER_TYPE (>0: N_2WIKI is replaced by the first
#   WIKI_PER_TYPE 2Wiki training records of each question type), TRAIN_STEPS (-1 = one epoch),
#   LR, BATCH, MAX_LENGTH, AGENT_STEPS, MAX_TOKENS, KB_METHOD (hybrid | bm25), AG (the agentrag command),
#   EVAL_HF_BASE=1 (also evaluate the untrained model through hf:). AGENT_STEPS must exceed the most hops
#   (4: 2Wiki bridge_comparison) + 1, or the react agent's forced answer turn comes before the last search.
# The compact react protocol, the same for the teacher and both evaluations (so a training record fits
# MAX_LENGTH whole): SYSTEM_PROMPT (short), TOP_K documents per search, each cut to DOC_CHARS characters;
# FORCED_SHARE of the teacher's paths end with the agent's forced answer turn (docs/loop.md).
# The base evaluation runs beside the training (it needs no checkpoint); PARALLEL=0 runs them in turn.
# Rerunning resumes every step (KBs kept, synth/eval runs resume, a finished training is not redone).
set -euo pipefail
OUT=${1:-runs/loop}
AG=${AG:-.venv/bin/agentrag}
PY=${PY:-.venv/bin/python}
SHARED_DATA="${AGENTRAG_SHARED:-../shared}/data"
N_MUSIQUE=${N_MUSIQUE:-200}; N_2WIKI=${N_2WIKI:-300}; N_DEV=${N_DEV:-40}; DEV_SKIP=${DEV_SKIP:-0}
WIKI_PER_TYPE=${WIKI_PER_TYPE:-0}
TRAIN_STEPS=${TRAIN_STEPS:--1}; LR=${LR:-5e-5}; BATCH=${BATCH:-2}; MAX_LENGTH=${MAX_LENGTH:-2048}
AGENT_STEPS=${AGENT_STEPS:-6}; MAX_TOKENS=${MAX_TOKENS:-128}; KB_METHOD=${KB_METHOD:-hybrid}
TOP_K=${TOP_K:-3}; DOC_CHARS=${DOC_CHARS:-200}; FORCED_SHARE=${FORCED_SHARE:-0.5}; PARALLEL=${PARALLEL:-1}
SYSTEM_PROMPT=${SYSTEM_PROMPT:-"Answer the question with the \`{tool}\` search tool. Search one fact at a time \
with a short, self-contained query. When you know the answer, write it inside <answer></answer>: a few words \
only (a name, date, place, number or yes/no)."}
mkdir -p "$OUT/data"
t0=$(date +%s)
stamp() { echo "[loop +$(( $(date +%s) - t0 ))s] $*"; }
# --- training and dev slices (training files only for the teacher; the dev file only for eval) ---
head -n "$N_MUSIQUE" "$SHARED_DATA/musique/train_397.jsonl" > "$OUT/data/musique_train.jsonl"
if [ "$WIKI_PER_TYPE" -gt 0 ]; then  # a per-type quota, in file order (the types' shares are unequal)
  $PY - "$SHARED_DATA/2wikimultihopqa/train_600.jsonl" "$WIKI_PER_TYPE" > "$OUT/data/2wiki_train.jsonl" <<'PYEOF'
import collections, json, sys
seen = collections.Counter()
for line in open(sys.argv[1], encoding="utf-8"):
    kind = json.loads(line).get("type")
    if seen[kind] < int(sys.argv[2]):
        seen[kind] += 1
        sys.stdout.write(line)
PYEOF
else
  head -n "$N_2WIKI" "$SHARED_DATA/2wikimultihopqa/train_600.jsonl" > "$OUT/data/2wiki_train.jsonl"
fi
sed -n "$((DEV_SKIP + 1)),$((DEV_SKIP + N_DEV))p" "$SHARED_DATA/2wikimultihopqa/dev_with_context_164.jsonl" \
  > "$OUT/data/2wiki_dev.jsonl"
# --- 1. KB of the training contexts (the teacher searches it) and KB of the dev contexts (eval) ---
stamp "KBs ($KB_METHOD)"
[ -f "$OUT/kb_train/params.json" ] || $AG kb build "$OUT/data/musique_train.jsonl" "$OUT/data/2wiki_train.jsonl" \
  --out "$OUT/kb_train" --method "$KB_METHOD"
[ -f "$OUT/kb_dev/params.json" ] || $AG kb build "$OUT/data/2wiki_dev.jsonl" --out "$OUT/kb_dev" --method "$KB_METHOD"
# the protocol, written once for the teacher and the agent (JSON strings are valid YAML)
PROMPT_JSON=$($PY -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$SYSTEM_PROMPT")
cat > "$OUT/teacher.yaml" <<YAML
system_prompt: $PROMPT_JSON
top_k: $TOP_K
doc_chars: $DOC_CHARS
forced_share: $FORCED_SHARE
YAML
cat > "$OUT/eval.yaml" <<YAML
agent: react
agent_config: {max_steps: $AGENT_STEPS, max_tokens: $MAX_TOKENS, temperature: 0.0, top_k: $TOP_K,
               doc_chars: $DOC_CHARS, system_prompt: $PROMPT_JSON}
YAML
# --- 2. human-annotation teacher: react trajectories, every hop searched in kb_train ---
stamp "synth annotated"
$AG synth annotated --config "$OUT/teacher.yaml" --dataset "$OUT/data/musique_train.jsonl" \
  --dataset "$OUT/data/2wiki_train.jsonl" --kb "$OUT/kb_train" --out "$OUT/synth"
# --- 3. observation-masked SFT of the embedded model, and (beside it) the base model's evaluation ---
eval_base() {
  $AG eval --config "$OUT/eval.yaml" --dataset "$OUT/data/2wiki_dev.jsonl" --kb "$OUT/kb_dev" --llm embedded \
    --out "$OUT/eval_base" || [ $? = 3 ]
}
stamp "eval base (embedded)"
if [ "$PARALLEL" = 1 ]; then eval_base > "$OUT/eval_base.log" 2>&1 & base_pid=$!; else eval_base; fi
stamp "train sft"
$AG train sft --data "$OUT/synth/sft/trl_sft.jsonl" --out "$OUT/train" --max-steps "$TRAIN_STEPS" \
  --set learning_rate="$LR" --set batch_size="$BATCH" --set max_length="$MAX_LENGTH"
# --- 4. the same react agent, trained, on the same dev questions (never trained on) ---
stamp "eval trained (hf:$OUT/train/checkpoint)"
$AG eval --config "$OUT/eval.yaml" --dataset "$OUT/data/2wiki_dev.jsonl" --kb "$OUT/kb_dev" \
  --llm "hf:$OUT/train/checkpoint" --out "$OUT/eval_trained" || [ $? = 3 ]
# EVAL_HF_BASE=1 also evaluates the untrained model through hf: (same backend as the trained one, so the
# difference is the training alone, not llama.cpp's grammar and quantization) and compares it too.
if [ "${EVAL_HF_BASE:-0}" = 1 ]; then
  stamp "eval base (hf:, untrained)"
  [ -f "$OUT/base_checkpoint/config.json" ] || $PY - "$OUT/base_checkpoint" <<'PYEOF'
import sys
from agentrag.export.masking import training_chat_template
from agentrag.train.model import load_tokenizer, load_trainable_model
tok = load_tokenizer("embedded"); tok.chat_template = training_chat_template()
load_trainable_model("embedded").save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])
PYEOF
  $AG eval --config "$OUT/eval.yaml" --dataset "$OUT/data/2wiki_dev.jsonl" --kb "$OUT/kb_dev" \
    --llm "hf:$OUT/base_checkpoint" --out "$OUT/eval_base_hf" || [ $? = 3 ]
  $PY -m agentrag.eval.compare "$OUT/eval_base_hf" "$OUT/eval_trained" --out "$OUT/compare_hf.md"
fi
# --- 5. before/after table with a paired bootstrap CI on the F1 difference ---
if [ "$PARALLEL" = 1 ]; then
  wait "$base_pid" || { echo "eval base failed; see $OUT/eval_base.log" >&2; exit 1; }
fi
stamp "compare"
$PY -m agentrag.eval.compare "$OUT/eval_base" "$OUT/eval_trained" --out "$OUT/compare.md"
stamp "done: $OUT/compare.md"
