#!/bin/bash
# Ctrl-C in a real terminal, ten times at random moments: `hyctl train`
# runs in a tmux pane (a pseudo-terminal whose line discipline turns the
# keystroke into SIGINT to the whole foreground process group: hyctl and
# every worker, which hyctl then forwards its own to as well). The moment
# falls anywhere from start-up through the SFT warm-up into the iterations
# (rollout, update, checkpoint commit). Every run must exit 0 and either
# have committed exactly the iterations it reported, or, stopped before its
# first iteration, say that nothing was trained. One run is resumed after.
#
# usage: ctrl_c_test.sh HYCTL [TRIES]   (HY_CTRL_C_SEED repeats a sequence)
# Exit 77 (skipped) without tmux.
set -u
hyctl=$1
tries=${2:-10}
if ! command -v tmux > /dev/null; then
  echo "SKIP: no tmux"
  exit 77
fi
work=$(mktemp -d)
sock=hy-ctrl-c-$$
trap 'tmux -L "$sock" kill-server 2> /dev/null; rm -rf "$work"' EXIT
seed=${HY_CTRL_C_SEED:-$$}
RANDOM=$seed
echo "seed $seed (HY_CTRL_C_SEED=$seed repeats these moments)"
clean_env="env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR \
-u MASTER_PORT -u HY_TRAIN_CONFIG_YAML -u HY_RUN_ID -u TORCHELASTIC_RUN_ID"
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}
resumable=""
for i in $(seq "$tries"); do
  tenths=$((RANDOM % 70))  # 0.0 - 6.9 s after hyctl holds SIGINT.
  delay=$((tenths / 10)).$((tenths % 10))
  run=$work/run-$i
  tmux -L "$sock" new-session -d -s "t$i" -x 200 -y 50 \
    "$clean_env $hyctl train --nproc 2 --iterations 400 -o json \
--store $run > $run.out 2> $run.err; echo \$? > $run.rc"
  # The delay runs from the moment hyctl holds or catches SIGINT (its main
  # blocks it first thing): a Ctrl-C before that, while the loader maps
  # libtorch, kills any program, and is not what this test is about.
  ready=""
  for _ in $(seq 300); do
    pane=$(tmux -L "$sock" list-panes -t "t$i" -F '#{pane_pid}' 2> /dev/null)
    for pid in $pane $(pgrep -P "${pane:-0}" 2> /dev/null); do
      [ "$(readlink "/proc/$pid/exe" 2> /dev/null)" = "$(readlink -f \
        "$hyctl")" ] || continue
      masks=$(awk '/^Sig(Blk|Cgt):/ {print $2}' "/proc/$pid/status" \
        2> /dev/null)
      for m in $masks; do
        (((0x$m >> 1) & 1)) && ready=$pid
      done
    done
    [ -n "$ready" ] && break
    sleep 0.02
  done
  [ -n "$ready" ] || fail "try $i: hyctl did not start within 6 s"
  sleep "$delay"
  tmux -L "$sock" send-keys -t "t$i" C-c
  for _ in $(seq 1800); do
    [ -s "$run.rc" ] && break
    sleep 0.1
  done
  if [ ! -s "$run.rc" ]; then
    fail "try $i (Ctrl-C at ${delay} s): hyctl did not exit within 180 s"
    tmux -L "$sock" send-keys -t "t$i" C-c
    continue
  fi
  rc=$(cat "$run.rc")
  n=$(grep -c '"iteration"' "$run.out")
  echo "try $i: Ctrl-C at ${delay} s: exit $rc after $n iteration(s)"
  [ "$rc" = 0 ] || fail "try $i: exit $rc"
  for bad in "killed by signal" "restarting on" "Connection reset" \
    "Assertion"; do
    if grep -q "$bad" "$run.err"; then fail "try $i: '$bad' in its stderr"; fi
  done
  if [ "$n" -gt 0 ]; then
    grep -q "stopped by Interrupt after $n iteration(s); committed step $n" \
      "$run.err" || fail "try $i: did not commit the $n iteration(s) reached"
    # What the stores hold, read by another process: the step reached.
    "$hyctl" inspect "$run" 2> /dev/null | awk 'NR > 1 {print $1}' \
      | sort -u | grep -qx "$n" || fail "try $i: step $n is not in the stores"
    [ -z "$resumable" ] && resumable="$run $n"
  else
    grep -q "before the first iteration: nothing was trained" "$run.err" \
      || fail "try $i: stopped before any iteration without saying so"
  fi
  if [ "$failed" != 0 ]; then
    echo "--- stderr of try $i:"
    grep -v '^\[rank 0\] it ' "$run.err" | tail -20
  fi
done
if [ -n "$resumable" ]; then
  set -- $resumable
  if ! $clean_env "$hyctl" train --nproc 2 --resume "$1" \
    --iterations $(($2 + 2)) > "$work/resume.out" 2> "$work/resume.err"; then
    fail "--resume $1 after the stop at step $2"
    tail -20 "$work/resume.err"
  fi
  grep -q "checkpoint step $(($2 + 2))" "$work/resume.err" \
    "$work/resume.out" || fail "--resume did not reach step $(($2 + 2))"
fi
[ "$failed" = 0 ] && echo "PASS: $tries Ctrl-Cs, nothing lost"
exit "$failed"
