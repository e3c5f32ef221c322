#!/usr/bin/env bash
# Issue 14's scale run: configs/scale-qwen2-0.5b.yaml (494M parameters,
# GRPO, 4 ranks) for a few iterations; once step 2 is committed, node 3's
# worker is killed (SIGKILL) and its directory (store, replica, offload
# files) removed, as if its host were gone; the job restarts on the 3
# nodes left, recovers step 2 and goes on. Prints a row per iteration:
# peak RSS per rank (VmHWM, reset at each phase) and the phase of the
# largest, iteration and training seconds, checkpoint blocking and durable
# seconds; with --json the worker's JSON reports instead. About 4-5 min
# and 20 GB of memory on this machine (2 cores, 24 GB). Run from anywhere
# after the build; the Qwen3 tokenizer is tests/data/tokenizers/qwen3
# (in the repository).
#   scripts/scale-grpo.sh [--json] [--no-kill] [hyctl train args, e.g.
#                         --set trainer.offload_optimizer=false]
# HYCTL (default build/bin/hyctl) and HY_SCALE_DIR (default
# runs/scale-<time>) override where hyctl and the run's files are.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HYCTL:-build/bin/hyctl}
R=${HY_SCALE_DIR:-runs/scale-$(date +%s)}
json=0
kill_node=1
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=1 ;;
    --no-kill) kill_node=0 ;;
    *) break ;;
  esac
  shift
done
rm -rf "$R"
mkdir -p "$R"
: >"$R/log"
"$H" data gen-arith "$R/train.jsonl" --count 2000 --seed 1 --ops + \
  --max-digits 1 >/dev/null
"$H" train --config configs/scale-qwen2-0.5b.yaml --data "$R/train.jsonl" \
  --store "$R/store" -o json "$@" >"$R/reports" \
  2>>"$R/log" &
job=$!
if [ "$kill_node" = 1 ]; then
  while kill -0 "$job" 2>/dev/null; do
    if grep -q '"checkpoint_step": *2\b' "$R/reports" 2>/dev/null; then
      kill -9 "$(cat "$R/store/node-3/worker.pid")"
      rm -rf "$R/store/node-3"
      echo "scale-grpo: killed node 3 after step 2 committed" >>"$R/log"
      break
    fi
    sleep 1
  done
fi
rc=0
wait "$job" || rc=$?
grep -h 'recovered step\|scale-grpo' "$R/log" >&2 || true
if [ "$json" = 1 ]; then
  grep '^{' "$R/reports"
else
  python3 - "$R/reports" <<'PY'
import json, sys
print("| iteration | ranks | peak RSS per rank, MB | peak phase | iteration s"
      " | train s | blocking ms | durable s |")
print("|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    peaks = r.get("phase_peak_rss_mb") or {}
    if isinstance(peaks, list):
        peaks = {p["phase"]: p["mb"] for p in peaks}
    phase = max(peaks, key=peaks.get) if peaks else "?"
    rss = [round(x) for x in r.get("peak_rss_mb", [])]
    print(f"| {r['iteration']} | {r['world_size']} | {min(rss)}-{max(rss)} "
          f"| {phase} | {r['iteration_ms'] / 1e3:.1f} "
          f"| {r.get('train_ms', 0) / 1e3:.1f} "
          f"| {r.get('checkpoint_ms', 0):.3f} "
          f"| {r.get('checkpoint_durable_ms', 0) / 1e3:.1f} |")
PY
fi
exit "$rc"
