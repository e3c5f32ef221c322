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
# Usage: examples_test.sh PYTHON WORKDIR
set -eu
set -o pipefail
PY=${1:?usage: examples_test.sh PYTHON WORKDIR}
W=${2:?usage: examples_test.sh PYTHON WORKDIR}
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
