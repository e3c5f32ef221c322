#!/usr/bin/env bash
# The flags every hy_bench_* binary shares (bench/bench_flags.h), checked on
# one binary without measuring anything: --help lists its flags and --json
# and exits 0; an unknown flag, a missing value and a value out of range or
# not a number each exit 64 with a line naming the flag.
#   usage_test.sh BENCH_BINARY NUMERIC_FLAG
set -u
bin=$1 flag=$2
fail() { echo "FAIL: $(basename "$bin"): $*"; exit 1; }
out=$("$bin" --help 2>&1); rc=$?
[ $rc = 0 ] || fail "--help exited $rc"
grep -q -- "--json" <<<"$out" || fail "--help does not list --json: $out"
grep -q -- "$flag" <<<"$out" || fail "--help does not list $flag: $out"
for args in "--no-such-flag" "$flag" "$flag 0" "$flag lots"; do
  # shellcheck disable=SC2086
  err=$("$bin" $args 2>&1 >/dev/null); rc=$?
  [ $rc = 64 ] || fail "'$args' exited $rc, not 64 ($err)"
  name=${args%% *}
  grep -q -- "$name" <<<"$err" || fail "'$args': the error does not name $name: $err"
done
echo "ok: $(basename "$bin")"
