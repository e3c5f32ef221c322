#!/bin/bash
# Runs every script in examples/ as a user would (the installed package on
# PYTHONPATH, torchrun for the multi-rank ones) and checks what each
# promises:
#   save_and_resume.py   stopped at step 6 and resumed to 10, the loss at
#                        step 10 equals an unbroken run's, digit for digit
#   fsdp2_dcp.py         2 ranks of FSDP2 save and load through hystate.dcp
#                        bit for bit (the script asserts it)
#   load_other_world.py  saved on 4 ranks, loaded on 3, each rank's rows
#                        bit for bit (the script asserts it)
#   inspect_and_verify.py  lists the steps, verifies every chunk, keeps the
#                        newest 2 steps
# With a third argument "grpo", only fsdp2_vllm_grpo.py (CTest
# examples.fsdp2_vllm_grpo; exits 77, skipped, without .venv-vllm): GRPO
# on the tiny Llama with a vLLM engine, checkpoints every 2 steps, SIGKILL
# to torchrun and both ranks after step 3's line, then the same command
# again: it resumes at the last committed step (2), ends the engine the
# kill left and finishes step 5; after every step the engine holds that
# step's weights, the sync sent bytes and the reward is a number.
# Usage: examples_test.sh PYTHON WORKDIR [grpo]
set -eu
set -o pipefail
PY=${1:?usage: examples_test.sh PYTHON WORKDIR [grpo]}
W=${2:?usage: examples_test.sh PYTHON WORKDIR [grpo]}
MODE=${3:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TORCHRUN=$(dirname "$PY")/torchrun
rm -rf "$W"
mkdir -p "$W"
cd "$W"
run() { echo "== $*"; "$@"; }
quiet_torchrun() {  # torchrun's banner on stderr stays out of the log.
  "$TORCHRUN" --nproc-per-node "$1" --master-port "$(free_port)" "${@:2}" \
    2> >(grep -v '^W[0-9]\|^\*\*\*\|OMP_NUM_THREADS' >&2)
}
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [[ $MODE == grpo ]]; then
  VLLM_PY=${HY_VLLM_PYTHON:-$SRC/.venv-vllm/bin/python3}
  if [[ ! -x $VLLM_PY ]]; then
    echo "skipped: no vLLM interpreter at $VLLM_PY (scripts/install-deps.sh)"
    exit 77
  fi
  grpo=("$SRC/examples/fsdp2_vllm_grpo.py" --model tiny --steps 5
        --ckpt-every 2 --ckpt ck --lr 1e-3 --json)
  echo "== torchrun 2 examples/fsdp2_vllm_grpo.py, kill -9 after step 3"
  start=$SECONDS
  pid=
  cleanup() {  # What a failed check would leave running.
    [[ -n $pid ]] && kill -9 "$pid" $(ps -o pid= --ppid "$pid") 2>/dev/null
    [[ -e ck/engine/engine.pid ]] &&
      kill -9 -- "-$(cat ck/engine/engine.pid)" 2>/dev/null
    return 0
  }
  trap cleanup EXIT
  "$TORCHRUN" --nproc-per-node 2 --master-port "$(free_port)" "${grpo[@]}" \
    >k1.log 2>k1.err &
  pid=$!  # torchrun; it starts each rank in a session of its own.
  until grep -qs '^{"step": 3,' k1.log; do
    kill -0 "$pid" 2>/dev/null || {
      cat k1.log; tail -30 k1.err; echo "it ended before step 3"; exit 1; }
    sleep 0.02
  done
  # SIGKILL to torchrun and both ranks at once, as the OOM killer or a
  # scheduler would; the engine (rank 0's child, in a session of its own)
  # is left running.
  kill -9 "$pid" $(ps -o pid= --ppid "$pid")
  wait "$pid" || true
  pid=
  cat k1.log
  stale=$(cat ck/engine/engine.pid)
  kill -0 "$stale"
  # The newest committed save (hy numbers DCP's saves 0, 1, ...: the
  # example's steps 2, 4, ...): 2, or 4 where the kill came late.
  saved=$(( 2 + 2 * $("$PY" -c 'import hystate; print(hystate.open("ck").steps()[-1])') ))
  echo "== the same command again (committed: step $saved)"
  "$TORCHRUN" --nproc-per-node 2 --master-port "$(free_port)" "${grpo[@]}" \
    >k2.log 2>k2.err || { cat k2.log; tail -30 k2.err; exit 1; }
  cat k2.log
  ! kill -0 "$stale" 2>/dev/null || { echo "engine $stale still runs"; exit 1; }
  [[ ! -e ck/engine/engine.pid ]]
  "$PY" - "$saved" k1.log k2.log <<'EOF'
import json, math, sys
saved = int(sys.argv[1])
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[2:]]
for rows in runs:  # Each run's first push brings the new engine the model.
    first = next(r for r in rows if "pushed" in r)
    assert first["sync_mode"] == "full" and first["sync_bytes"] > 0, first
steps = [[r for r in rows if "step" in r] for rows in runs]
assert [r["step"] for r in steps[0]] == [1, 2, 3], steps[0]
assert saved in (2, 4), saved
resumed = [r["resumed"] for r in runs[1] if "resumed" in r]
assert resumed == [saved], (resumed, saved)
assert [r["step"] for r in steps[1]] == list(range(saved + 1, 6)), steps[1]
assert runs[1][-1] == {"done": 5}, runs[1][-1]
for r in steps[0] + steps[1]:
    assert r["engine_version"] == str(r["step"]), r
    assert r["sync_bytes"] > 0 and r["sync_mode"] == "delta", r
    assert math.isfinite(r["reward"]) and 0 <= r["reward"] <= 1, r
    assert math.isfinite(r["loss"]), r
print(f"grpo: killed after step 3, resumed at step {saved}, finished 5")
for r in steps[0] + steps[1]:
    print(f"step {r['step']}: sync {r['sync_s']:.3f} s {r['sync_bytes']} B, "
          f"ckpt {r['ckpt_blocking_s'] or 0:.3f} s, step {r['step_s']:.2f} s")
EOF
  echo "examples.fsdp2_vllm_grpo: passed in $((SECONDS - start)) s"
  exit 0
fi

run "$PY" "$SRC/examples/save_and_resume.py" --dir resumed --steps 6 | tee a.log
run "$PY" "$SRC/examples/save_and_resume.py" --dir resumed --steps 10 | tee b.log
run "$PY" "$SRC/examples/save_and_resume.py" --dir unbroken --steps 10 | tee c.log
grep -q "^resumed at step 6$" b.log
resumed=$(grep "^step 10 loss" b.log)
unbroken=$(grep "^step 10 loss" c.log)
[[ $resumed == "$unbroken" ]] || {
  echo "resumed ($resumed) differs from unbroken ($unbroken)"; exit 1; }

echo "== torchrun 2 examples/fsdp2_dcp.py"
quiet_torchrun 2 "$SRC/examples/fsdp2_dcp.py" --dir dcp | tee d.log
grep -q "2 ranks: saved and loaded step 0 of dcp" d.log

echo "== torchrun 4 / 3 examples/load_other_world.py"
quiet_torchrun 4 "$SRC/examples/load_other_world.py" --dir world save |
  tee e.log
grep -q "saved step 0 on 4 ranks" e.log
quiet_torchrun 3 "$SRC/examples/load_other_world.py" --dir world load |
  tee f.log
# Counted as matches, not lines: the 3 ranks share one pipe, and two of
# them printed into one line once ("...bit for bitrank 2 of 3: ...").
[[ $(grep -o "of 3: rows [0-9]*\.\.[0-9]* of step 0 (saved on 4 ranks) load bit for bit" f.log | wc -l) == 3 ]]

run "$PY" "$SRC/examples/inspect_and_verify.py" resumed --keep-last 2 |
  tee g.log
grep -q "steps \[2, 4, 6, 8, 10\]" g.log
grep -q "^verified [1-9][0-9]* chunks$" g.log
grep -q "^kept steps \[8, 10\]$" g.log
run "$PY" "$SRC/examples/inspect_and_verify.py" dcp | tee h.log
grep -q "^verified [1-9][0-9]* chunks$" h.log
echo "examples: all passed"
