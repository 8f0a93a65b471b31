#!/usr/bin/env bash
# The closed loop on one CPU, three arms (docs/loop.md): KB from the shared TRAINING contexts -> the
# human-annotation teacher (no LLM; react trajectories, EviPath planner/executor conversations and
# ReasonRAG reason_ground rounds of the same kept paths) -> SFT of the embedded model per protocol ->
# evaluation of base and trained models on questions never used for training -> tables with paired
# bootstrap CIs. Usage: scripts/loop.sh OUT_DIR. Everything is sized by the environment:
#   ARMS (default "react evipath reasonrag"):
#     react     react SFT on the teacher's react trajectories vs the base model (react agent); with
#               STANDARD_RAG=1 (default) also the standard_rag agent on the base and on the react SFT model;
#     evipath   the planner_executor agent SFT'd on the teacher's planner + executor conversations vs react
#               SFT'd on the same items' react trajectories (the react arm's model) with the same training-
#               token budget (steps x batch x mean record length matched: OUT/budget_*.json), both vs base;
#     reasonrag a reason_ground SFT policy (same items, same token budget) runs `synth reasonrag` MCTS on
#               RR_PER_FILE training questions of each training file through its GGUF; its process-level
#               preference pairs train `train dpo` on top of the SFT checkpoint; DPO vs SFT (reason_ground).
#     (evipath and reasonrag need react's model: the token budget is react's)
#   EVAL_SLICES: "DATASET:FIRST-LAST ..." 1-based lines of the evaluation files, DATASET one of 2wiki
#     (2wikimultihopqa/dev_with_context_164), hotpotqa (hotpotqa/dev_distractor_200), musique
#     (musique/train_100, never read for training); default "2wiki:DEV_SKIP+1-DEV_SKIP+N_DEV". The
#     held-out set H of docs/loop.md is "2wiki:86-125 hotpotqa:161-200 musique:61-100".
#   N_MUSIQUE, N_2WIKI (training records read), WIKI_PER_TYPE (>0: the first WIKI_PER_TYPE 2Wiki training
#     records of each question type instead of N_2WIKI), TRAIN_STEPS (react SFT; -1 = one epoch), LR, BATCH,
#     MAX_LENGTH, AGENT_STEPS, MAX_TOKENS, KB_METHOD (hybrid | bm25), GGUF (q8_0 | f16: trained models are
#     evaluated through their GGUF on llama.cpp; none: through hf:), AG (the agentrag command),
#   RR_PER_FILE, RR_ITERATIONS, RR_ROLLOUTS (MCTS), DPO_STEPS (-1 = one epoch), DPO_LR, DPO_BETA,
#   EVAL_HF_BASE=1 (react arm: also the untrained model through hf:). AGENT_STEPS must exceed the most hops
#   (4: 2Wiki bridge_comparison) + 1, or the react agent's forced answer turn comes before the last search.
# The compact protocol, the same for the teacher and every evaluation (so a training record fits MAX_LENGTH
# whole): SYSTEM_PROMPT (react), TOP_K documents per search, each cut to DOC_CHARS characters; FORCED_SHARE of
# the teacher's react paths end with the agent's forced answer turn (docs/loop.md).
# The base models' evaluations run beside the training (they need no checkpoint); PARALLEL=0 runs them in
# turn. Rerunning resumes every step (KBs kept, synth/eval runs resume, a finished training is not redone).
# OUT/steps.log has one line per step: epoch seconds, load average, the step (benchmarks/loop.py reads it).
set -euo pipefail
OUT=${1:-runs/loop}
AG=${AG:-.venv/bin/agentrag}
PY=${PY:-.venv/bin/python}
SHARED_DATA="${AGENTRAG_SHARED:-../shared}/data"
ARMS=${ARMS:-"react evipath reasonrag"}
N_MUSIQUE=${N_MUSIQUE:-200}; N_2WIKI=${N_2WIKI:-300}; N_DEV=${N_DEV:-40}; DEV_SKIP=${DEV_SKIP:-0}
WIKI_PER_TYPE=${WIKI_PER_TYPE:-0}
EVAL_SLICES=${EVAL_SLICES:-"2wiki:$((DEV_SKIP + 1))-$((DEV_SKIP + N_DEV))"}
TRAIN_STEPS=${TRAIN_STEPS:--1}; LR=${LR:-5e-5}; BATCH=${BATCH:-2}; MAX_LENGTH=${MAX_LENGTH:-2048}
AGENT_STEPS=${AGENT_STEPS:-6}; MAX_TOKENS=${MAX_TOKENS:-128}; KB_METHOD=${KB_METHOD:-hybrid}
TOP_K=${TOP_K:-3}; DOC_CHARS=${DOC_CHARS:-200}; FORCED_SHARE=${FORCED_SHARE:-0.5}; PARALLEL=${PARALLEL:-1}
GGUF=${GGUF:-q8_0}; STANDARD_RAG=${STANDARD_RAG:-1}
# reason_ground rounds: a query and an evidence round per hop (4 hops at most), the answer round, one spare
RG_STEPS=${RG_STEPS:-$((2 * AGENT_STEPS - 2))}
RR_PER_FILE=${RR_PER_FILE:-10}; RR_ITERATIONS=${RR_ITERATIONS:-8}; RR_ROLLOUTS=${RR_ROLLOUTS:-1}
DPO_STEPS=${DPO_STEPS:--1}; DPO_LR=${DPO_LR:-1e-6}; DPO_BETA=${DPO_BETA:-0.3}
SYSTEM_PROMPT=${SYSTEM_PROMPT:-"Answer the question with the \`{tool}\` search tool. Search one fact at a time \
with a short, self-contained query. When you know the answer, write it inside <answer></answer>: a few words \
only (a name, date, place, number or yes/no)."}
has_arm() { case " $ARMS " in *" $1 "*) return 0 ;; esac; return 1; }
for arm in $ARMS; do
  case $arm in react | evipath | reasonrag) ;; *) echo "ARMS: unknown arm '$arm' (react, evipath, reasonrag)" >&2; exit 2 ;; esac
done
if { has_arm evipath || has_arm reasonrag; } && ! has_arm react; then
  echo "ARMS: evipath and reasonrag need the react arm (its model and its training-token budget)" >&2; exit 2
fi
mkdir -p "$OUT/data" "$OUT/eval" "$OUT/compare"
t0=$(date +%s)
stamp() {
  echo "[loop +$(( $(date +%s) - t0 ))s] $*"
  echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -) $*" >> "$OUT/steps.log"
}
stamp "start: ARMS=$ARMS EVAL_SLICES=$EVAL_SLICES"
# --- training slices (training files only) and evaluation slices (never trained on) ---
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
EVAL_DS=""
for slice in $EVAL_SLICES; do
  ds=${slice%%:*}; range=${slice#*:}; first=${range%-*}; last=${range#*-}
  case $ds in
    2wiki) file=2wikimultihopqa/dev_with_context_164.jsonl ;;
    hotpotqa) file=hotpotqa/dev_distractor_200.jsonl ;;
    musique) file=musique/train_100.jsonl ;;
    *) echo "EVAL_SLICES: unknown dataset '$ds' in '$slice' (2wiki, hotpotqa, musique)" >&2; exit 2 ;;
  esac
  sed -n "${first},${last}p" "$SHARED_DATA/$file" > "$OUT/data/eval_$ds.jsonl"
  [ -s "$OUT/data/eval_$ds.jsonl" ] || { echo "EVAL_SLICES: '$slice' selects no line of $file" >&2; exit 2; }
  EVAL_DS="$EVAL_DS $ds"
done
# --- 1. KB of the training contexts (the teacher and the MCTS search it), KB of the evaluation contexts ---
stamp "KBs ($KB_METHOD)"
[ -f "$OUT/kb_train/params.json" ] || $AG kb build "$OUT/data/musique_train.jsonl" "$OUT/data/2wiki_train.jsonl" \
  --out "$OUT/kb_train" --method "$KB_METHOD"
# shellcheck disable=SC2046
[ -f "$OUT/kb_eval/params.json" ] || $AG kb build $(for ds in $EVAL_DS; do echo "$OUT/data/eval_$ds.jsonl"; done) \
  --out "$OUT/kb_eval" --method "$KB_METHOD"
# the protocol, written once for the teacher and the agents (JSON strings are valid YAML)
PROMPT_JSON=$($PY -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$SYSTEM_PROMPT")
cat > "$OUT/teacher.yaml" <<YAML
system_prompt: $PROMPT_JSON
top_k: $TOP_K
doc_chars: $DOC_CHARS
forced_share: $FORCED_SHARE
YAML
cat > "$OUT/eval_react.yaml" <<YAML
agent: react
agent_config: {max_steps: $AGENT_STEPS, max_tokens: $MAX_TOKENS, temperature: 0.0, top_k: $TOP_K,
               doc_chars: $DOC_CHARS, system_prompt: $PROMPT_JSON}
YAML
cat > "$OUT/eval_standard_rag.yaml" <<YAML
agent: standard_rag
agent_config: {temperature: 0.0, top_k: $TOP_K, doc_chars: $DOC_CHARS}
YAML
cat > "$OUT/eval_planner_executor.yaml" <<YAML
agent: planner_executor
agent_config: {max_steps: $AGENT_STEPS, max_searches: $AGENT_STEPS, max_tokens: $MAX_TOKENS, temperature: 0.0,
               top_k: $TOP_K, max_passage_chars: $DOC_CHARS, executor_max_tokens: $((MAX_TOKENS + 64))}
YAML
cat > "$OUT/eval_reason_ground.yaml" <<YAML
agent: reason_ground
agent_config: {max_steps: $RG_STEPS, max_tokens: $MAX_TOKENS, temperature: 0.0, top_k: $TOP_K, doc_chars: $DOC_CHARS}
YAML
cat > "$OUT/reasonrag.yaml" <<YAML
seed: 0
mcts: {iterations: $RR_ITERATIONS, max_children: 2, max_iter: $RG_STEPS, top_k: $TOP_K, doc_chars: $DOC_CHARS,
       temperature: 0.8, max_tokens: $MAX_TOKENS}
value: {kind: spre, rollouts: $RR_ROLLOUTS}
YAML
# evaluate NAME with AGENT and LLM on every evaluation dataset: OUT/eval/NAME_DATASET (one run each)
evaluate() {
  local name=$1 agent=$2 llm=$3 ds
  for ds in $EVAL_DS; do
    $AG eval --config "$OUT/eval_$agent.yaml" --dataset "$OUT/data/eval_$ds.jsonl" --kb "$OUT/kb_eval" \
      --llm "$llm" --out "$OUT/eval/${name}_$ds" || [ $? = 3 ]
  done
}
runs() { local ds out=""; for ds in $EVAL_DS; do out="$out,$OUT/eval/${1}_$ds"; done; echo "${out#,}"; }
# a trained model as the evaluations load it: its GGUF on llama.cpp, or the checkpoint through hf:
trained() { if [ "$GGUF" = none ]; then echo "hf:$1/checkpoint"; else echo "embedded:$1/checkpoint.$GGUF.gguf"; fi; }
GGUF_OPT=(); [ "$GGUF" = none ] || GGUF_OPT=(--gguf "$GGUF")
# SFT steps for DATA that give the same training tokens as TRAIN_STEPS x BATCH records of the react data
matched_steps() {
  $PY - "$OUT/synth/sft/trl_sft.jsonl" "$1" "$TRAIN_STEPS" "$BATCH" "$MAX_LENGTH" "$2" <<'PYEOF'
import json, sys
from agentrag.export.masking import training_chat_template
from agentrag.export.sft import read_trl_records
from agentrag.train.budget import matched_steps
from agentrag.train.model import load_tokenizer
from agentrag.train.sft import tokenize_sft
ref, data, steps, batch, max_len, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
tok = load_tokenizer("embedded")
tok.chat_template = training_chat_template()
def lengths(path):
    rows = tokenize_sft(read_trl_records(path), tok, max_len)
    return [len(r["input_ids"]) for r in rows]
budget = {"reference": ref, "data": data, **matched_steps(lengths(ref), lengths(data), steps, batch)}
json.dump(budget, open(out, "w"), indent=2)
print(budget["steps"])
PYEOF
}
# --- 2. the human-annotation teacher: every hop searched in kb_train; react, planner_executor and
#        reason_ground data of the same kept paths ---
stamp "synth annotated"
$AG synth annotated --config "$OUT/teacher.yaml" --dataset "$OUT/data/musique_train.jsonl" \
  --dataset "$OUT/data/2wiki_train.jsonl" --kb "$OUT/kb_train" --out "$OUT/synth"
# --- 3. the base models' evaluations, beside the training (they need no checkpoint) ---
eval_bases() {
  evaluate react_base react embedded
  if [ "$STANDARD_RAG" = 1 ]; then evaluate srag_base standard_rag embedded; fi
  if has_arm evipath; then evaluate pe_base planner_executor embedded; fi
}
stamp "eval base models (embedded; in the background, their minutes are in the table)"
if [ "$PARALLEL" = 1 ]; then eval_bases > "$OUT/eval_base.log" 2>&1 & base_pid=$!; else eval_bases; fi
# --- 4. react arm: observation-masked SFT on the react trajectories, then react (and standard_rag) ---
stamp "train sft (react)"
$AG train sft --data "$OUT/synth/sft/trl_sft.jsonl" --out "$OUT/train" --max-steps "$TRAIN_STEPS" "${GGUF_OPT[@]}" \
  --set learning_rate="$LR" --set batch_size="$BATCH" --set max_length="$MAX_LENGTH"
stamp "eval react sft ($(trained "$OUT/train"))"
evaluate react_sft react "$(trained "$OUT/train")"
if [ "$STANDARD_RAG" = 1 ]; then
  stamp "eval standard_rag sft"
  evaluate srag_sft standard_rag "$(trained "$OUT/train")"
fi
# --- 5. EviPath arm: planner_executor SFT on the planner + executor conversations, same token budget ---
if has_arm evipath; then
  stamp "train sft (planner_executor)"
  PE_STEPS=$(matched_steps "$OUT/synth/sft_planner_executor/trl_sft.jsonl" "$OUT/budget_planner_executor.json")
  $AG train sft --data "$OUT/synth/sft_planner_executor/trl_sft.jsonl" --out "$OUT/train_pe" \
    --max-steps "$PE_STEPS" "${GGUF_OPT[@]}" --set learning_rate="$LR" --set batch_size="$BATCH" \
    --set max_length="$MAX_LENGTH"
  stamp "eval planner_executor sft"
  evaluate pe_sft planner_executor "$(trained "$OUT/train_pe")"
fi
# --- 6. ReasonRAG arm: reason_ground SFT policy (same budget) -> MCTS on training questions -> DPO ---
if has_arm reasonrag; then
  stamp "train sft (reason_ground)"
  RG_TRAIN=$(matched_steps "$OUT/synth/sft_reason_ground/trl_sft.jsonl" "$OUT/budget_reason_ground.json")
  $AG train sft --data "$OUT/synth/sft_reason_ground/trl_sft.jsonl" --out "$OUT/train_rg" \
    --max-steps "$RG_TRAIN" --gguf "${GGUF/none/q8_0}" --set learning_rate="$LR" --set batch_size="$BATCH" \
    --set max_length="$MAX_LENGTH"
  stamp "synth reasonrag (policy embedded:$OUT/train_rg/checkpoint.${GGUF/none/q8_0}.gguf, $RR_PER_FILE questions a file)"
  $AG synth reasonrag --config "$OUT/reasonrag.yaml" --dataset "$OUT/data/musique_train.jsonl" \
    --dataset "$OUT/data/2wiki_train.jsonl" --limit "$RR_PER_FILE" --kb "$OUT/kb_train" \
    --llm "embedded:$OUT/train_rg/checkpoint.${GGUF/none/q8_0}.gguf" --out "$OUT/rr" || [ $? = 3 ]
  stamp "eval reason_ground sft"
  evaluate rg_sft reason_ground "$(trained "$OUT/train_rg")"
  if [ -s "$OUT/rr/dpo/trl_dpo.jsonl" ]; then
    stamp "train dpo (on the reason_ground sft checkpoint)"
    $AG train dpo --data "$OUT/rr/dpo/trl_dpo.jsonl" --model "$OUT/train_rg/checkpoint" --out "$OUT/train_dpo" \
      --max-steps "$DPO_STEPS" "${GGUF_OPT[@]}" --set learning_rate="$DPO_LR" --set beta="$DPO_BETA" \
      --set batch_size=1 --set max_length="$MAX_LENGTH"
    stamp "eval reason_ground dpo"
    evaluate rg_dpo reason_ground "$(trained "$OUT/train_dpo")"
  else
    stamp "no preference pair from the MCTS (see $OUT/rr/metrics.json): no DPO step, no rg_dpo rows"
  fi
fi
# EVAL_HF_BASE=1 also evaluates the untrained model through hf: (react arm)
if [ "${EVAL_HF_BASE:-0}" = 1 ]; then
  stamp "eval base (hf:, untrained)"
  [ -f "$OUT/base_checkpoint/config.json" ] || $PY - "$OUT/base_checkpoint" <<'PYEOF'
import sys
from agentrag.export.masking import training_chat_template
from agentrag.train.model import load_tokenizer, load_trainable_model
tok = load_tokenizer("embedded"); tok.chat_template = training_chat_template()
load_trainable_model("embedded").save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])
PYEOF
  evaluate react_base_hf react "hf:$OUT/base_checkpoint"
  $PY -m agentrag.eval.compare "$(runs react_base_hf)" "$(runs react_sft)" --out "$OUT/compare/react_hf.md"
fi
# --- 7. the tables: paired bootstrap CIs on the F1 and EM differences, pooled and per dataset ---
if [ "$PARALLEL" = 1 ]; then
  wait "$base_pid" || { echo "eval of the base models failed; see $OUT/eval_base.log" >&2; exit 1; }
fi
stamp "compare"
compare_runs() { $PY -m agentrag.eval.compare "$(runs "$2")" "$(runs "$3")" --out "$OUT/compare/$1.md"; }
compare_runs react react_base react_sft
cp "$OUT/compare/react.md" "$OUT/compare.md"; cp "$OUT/compare/react.json" "$OUT/compare.json"
if [ "$STANDARD_RAG" = 1 ]; then compare_runs standard_rag srag_base srag_sft; fi
if has_arm evipath; then compare_runs pe pe_base pe_sft; compare_runs pe_vs_react react_sft pe_sft; fi
if has_arm reasonrag && [ -d "$OUT/eval/rg_dpo_${EVAL_DS##* }" ]; then compare_runs dpo rg_sft rg_dpo; fi
stamp "done: $OUT/compare/"
