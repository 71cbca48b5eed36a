#!/usr/bin/env bash
# The prepared GPU run of docs/BENCHMARKS.md ("Dummy members at 8B shapes on one GPU"):
#
#     tools/gpu_run.sh OUTDIR                      # on the GPU machine, from the repository root
#     WASH_GPU_RUN_CPU=1 tools/gpu_run.sh OUTDIR   # every step on the CPU with tiny shapes (CI)
#
# Needs the bundle made here first (`python tools/gpu_bundle.py pack .gpu`, carried as .gpu):
# the machine has no network and the tokenizers are not tracked. Steps, each in its own
# process under its own time limit, each writing its JSON into OUTDIR as it goes; a step that
# fails or times out does not stop the next:
#
#   unpack    the tokenizers into a fresh cache ($WASH_CACHE_DIR, a temporary folder)   ~5 s
#   versions  python, torch, transformers, GPU, driver; `import wash` without the app's
#             packages                                                                  ~15 s
#   smoke     SmolLM2-135M's and Gemma-3-270M's shapes in bf16 on the GPU: on the device,
#             finite logits, seeded WASH runs (mixed schemes, eager, lazy, top-k 10)     ~60 s
#   bench     three 8B-class shapes (Llama-3.1-8B + SmolLM2 tokenizer, Mistral-7B + Gemma 3,
#             Qwen2.5-7B + SmolLM2): ~47 GB of bf16 weights built on the GPU in seconds, plain
#             decodes, WASH eager/lazy at N = 2, 3, N = 3 on one model, lazy N = 3 on members
#             sharing a tokenizer, 48 tokens x 1 round, host reads and CUDA syncs per token,
#             the averaging's share of a step, peak GPU memory                         ~120 s
#   compiled  the same bench on compiled members (`--backend compiled`: static KV cache, the
#             one-id step captured as a CUDA graph, logits and the served step on the GPU),
#             2 rounds, compilation included; never run on a GPU yet                  ~200 s?
#
# Time limits 30 + 30 + 75 + 140 + 205 s: at most 480 s (8.0 minutes) on the GPU; bench and
# compiled each stop at their limit and keep what they measured (the report is written after
# every round). Files written (at most 8 come back from the device): gpu-run.log, steps.txt,
# versions.json, smoke.json, bench.json, compiled.json.
set -u
OUT=${1:?usage: tools/gpu_run.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3 || command -v python)}
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export WASH_CACHE_DIR=${WASH_CACHE_DIR:-$(mktemp -d)}
BUNDLE=${WASH_GPU_BUNDLE:-.gpu}
LOG="$OUT/gpu-run.log"
: >"$OUT/steps.txt"

if [ -n "${WASH_GPU_RUN_CPU:-}" ] && [ "${WASH_GPU_RUN_CPU}" != 0 ]; then
  BENCH=(--dummy tiny-llama@smollm2 tiny-mistral@gemma3 tiny-qwen2@smollm2 --device cpu --dtype float32
         --tokens 3)
  LOCAL_ROUNDS=1 COMPILED_ROUNDS=1
  COMPILED=compiled:compile=false
else
  BENCH=(--dummy llama-3.1-8b@smollm2 mistral-7b@gemma3 qwen2.5-7b@smollm2 --device cuda --dtype bfloat16
         --tokens 48)
  # the local members were measured over 3 rounds on 2026-11-27 (docs/gpu-h200/): one round here,
  # beside the compiled members' two, keeps the run within 8 minutes
  LOCAL_ROUNDS=1 COMPILED_ROUNDS=2
  COMPILED=compiled:mode=reduce-overhead
fi

step() {  # step NAME LIMIT_S COMMAND...: run it under its limit, log it, never stop the script
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "=== $name (limit ${limit} s): $*" | tee -a "$LOG"
  timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - start )) s" | tee -a "$OUT/steps.txt" "$LOG"
}

step unpack 30 "$PY" tools/gpu_bundle.py unpack "$BUNDLE" "$WASH_CACHE_DIR"
step versions 30 "$PY" -m tools.gpu_run versions "$OUT/versions.json"
step smoke 75 "$PY" -m tools.gpu_run smoke "$OUT/smoke.json"
# Run from OUTDIR so that the command the report records names no path of this machine; the report
# is also printed, but the file holds it (written after every stage) and the log the progress.
step bench 140 bash -c 'cd "$1" && "$2" -m wash bench "${@:3}" --out bench.json >/dev/null' _ "$OUT" "$PY" "${BENCH[@]}" \
  --rounds "$LOCAL_ROUNDS"
# The same bench on compiled members (a static KV cache, the one-id step as a CUDA graph); on the CPU
# the same static-cache path without compiling, so CI pays no compilation.
step compiled 205 bash -c 'cd "$1" && "$2" -m wash bench "${@:3}" --out compiled.json >/dev/null' _ "$OUT" "$PY" \
  "${BENCH[@]}" --rounds "$COMPILED_ROUNDS" --backend "$COMPILED"
"$PY" -m tools.gpu_run summary "$OUT" 2>&1 | tee -a "$LOG"
