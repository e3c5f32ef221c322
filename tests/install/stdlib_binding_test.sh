#!/usr/bin/env bash
# usage: stdlib_binding_test.sh BINARY...
# Every C++ standard library symbol that a LibTorch-using hy binary refers to
# binds to the C++ runtime, never to one of the copies that the torch
# wheel's libraries export (torch 2.11's libtorch.so: a std::filesystem
# whose remove_all jumps to address 0; see cmake/HyTorch.cmake). The dynamic
# loader's own record (LD_DEBUG=bindings, every symbol bound at start with
# LD_BIND_NOW) says where each of the binary's references went.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
torch_re='/(libtorch[^ /]*|libc10[^ /]*)\.so'
for bin in "$@"; do
  name=$(basename "$bin")
  rm -f "$tmp"/ld.*
  LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" timeout 60 "$bin" --help \
    >/dev/null 2>&1
  # "binding file <bin> [0] to <lib> [0]: normal symbol `<mangled>' ..."
  cat "$tmp"/ld.* 2>/dev/null |
    sed -nE "s#.*binding file ([^ ]+) \[[0-9]+\] to ([^ ]+) \[[0-9]+\]: normal symbol \`([^']+)'.*#\1 \2 \3#p" |
    awk -v b="$bin" '$1 == b { print $2, $3 }' >"$tmp/own"
  total=$(wc -l <"$tmp/own")
  to_torch=$(grep -cE "$torch_re" "$tmp/own")
  # std:: functions and objects, their typeinfo and vtables (mangled _ZNSt,
  # _ZNKSt, _ZSt, _ZTISt, _ZTVSt; std::__cxx11 and std::filesystem alike).
  grep -E "$torch_re" "$tmp/own" |
    awk '$2 ~ /^_Z(N|NK|TI|TV|TS)?St/' >"$tmp/bad"
  if [ "$total" -eq 0 ] || [ "$to_torch" -eq 0 ]; then
    echo "FAIL $name: the loader recorded $total bindings of its own," \
         "$to_torch to LibTorch (is it linked with LibTorch?)"
    fail=1
  elif [ -s "$tmp/bad" ]; then
    echo "FAIL $name: $(wc -l <"$tmp/bad") standard library symbols bound to" \
         "LibTorch's copies, e.g.:"
    head -5 "$tmp/bad" | while read -r lib sym; do
      echo "  $(echo "$sym" | c++filt) -> $lib"
    done
    fail=1
  else
    echo "ok $name: $total bindings, $to_torch to LibTorch, none of them std::"
  fi
done
exit $fail
