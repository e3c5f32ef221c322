#!/usr/bin/env bash
# Weight sync into a vLLM engine on another host, over a link of real
# speed: the engine and trainer rank 0 run in one network namespace, rank 1
# in another, joined by a veth pair shaped by tc (tbf) to each rate asked
# (lib/netns-link.sh). bench/vllm_sync_bench.py then measures, per rate,
# the full bf16 sync (rank 1's half of the model over c10d, rank 0 writing
# the weight file, the engine loading it) against a delta of what changed
# after 1%, 5% and 50% of the values changed, two ways: hyctl train's
# (rollout.vllm.delta) and hystate.vllm's (2 ranks of DTensor halves; rank
# 1 also with another hostname and its own /dev/shm). Before the bench, a
# plain bulk TCP transfer across the same link measures what tc's shaping
# gives.
#
# Usage: scripts/bench-vllm-link.sh [--json] [--rates "2 10"]
#          [--model 0.5b|demo] [--reps N] [--only hy|python]
#   Run after scripts/install-deps.sh and the build (vLLM's interpreter:
#   .venv-vllm, or HY_VLLM_PYTHON). Exit 77 (skip) without root /
#   CAP_NET_ADMIN.
set -uo pipefail
cd "$(dirname "$0")/.."
JSON=0 RATES="2 10" MODEL=0.5b REPS=3 SKIP=()
while [ $# -gt 0 ]; do
  case $1 in
    --json) JSON=1 ;;
    --rates) RATES=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --only) case $2 in hy) SKIP=(python) ;; python) SKIP=(hy) ;;
              *) echo "--only: hy or python" >&2; exit 64 ;; esac; shift ;;
    *) echo "usage: $0 [--json] [--rates \"2 10\"] [--model 0.5b|demo] [--reps N] [--only hy|python]" >&2
       exit 64 ;;
  esac
  shift
done
PY=$(command -v python3)
VPY=${HY_VLLM_PYTHON:-.venv-vllm/bin/python3}
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (CAP_NET_ADMIN) for network namespaces and tc"
command -v ip >/dev/null && command -v tc >/dev/null || skip "no ip(8) / tc(8) (iproute2)"
[ -x "$VPY" ] || { echo "no vLLM interpreter $VPY (scripts/install-deps.sh)" >&2; exit 1; }
. "$(dirname "$0")/lib/netns-link.sh"

for rate in $RATES; do
  at_rate "$rate" vllm_link
  ip netns exec "$NS0" "$VPY" bench/vllm_sync_bench.py --model "$MODEL" \
    --reps "$REPS" --skip verl restart demo ${SKIP[@]+"${SKIP[@]}"} --remote-netns "$NS1" \
    --master-addr "$A0" --remote-addr "$A1" $([ "$JSON" = 1 ] && echo --json) || {
    echo "bench/vllm_sync_bench.py failed at $rate Gb/s" >&2; exit 1; }
done
