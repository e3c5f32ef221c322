#!/usr/bin/env bash
# Regenerates the lock files in requirements/ from their .in files: every
# Python environment hy makes installs from one of them (exact versions of
# the whole tree, SHA-256 hashes; scripts/install-deps.sh refuses anything
# else), and debian.lock records the Debian packages' versions.
#
#   requirements/dev.in        -> dev.lock        .venv/
#   requirements/vllm.in       -> vllm.lock       .venv-vllm/
#   requirements/plain-root.in -> plain-root.lock the wheel test's plain root
#   requirements/lock-tool.in  -> lock-tool.lock  .venv-lock/ (uv, this tool)
#   requirements/debian.in     -> debian.lock     dpkg's versions, as installed
#
# The resolver is uv's (`uv pip compile --generate-hashes`): it resolves a
# tree the size of vLLM's in seconds, for a stated Python and platform
# rather than the machine it runs on, and writes pip's requirements format,
# so the install needs nothing but pip (`pip install --require-hashes
# --no-deps -r X.lock`). uv itself comes from lock-tool.lock, hash-checked.
#
# To move to newer versions on purpose: edit a .in file (or leave it and
# take the newest that fits), run this script, then scripts/install-deps.sh
# and the tests, and commit the .lock files with what changed in them.
# For Debian: `apt-get update && apt-get upgrade`, then this script records
# what is installed now.
#
# Usage: scripts/lock-deps.sh [--python-only]
#   HY_TORCH_FIND_LINKS: a folder or page with PyTorch's CPU wheels
#   (default /opt/wheels, where this kind of machine keeps torch 2.13.0+cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements
py_base="$(command -v python3 || echo /usr/bin/python3)"
find_links="${HY_TORCH_FIND_LINKS:-/opt/wheels}"

tool_venv=.venv-lock
if ! "${tool_venv}/bin/python3" scripts/lib/lockcheck.py check \
    "${req}/lock-tool.lock" >/dev/null 2>&1; then
  rm -rf "${tool_venv}"
  "${py_base}" -m venv "${tool_venv}"
  "${tool_venv}/bin/python3" -m pip install -q --require-hashes --no-deps \
    --only-binary :all: -r "${req}/lock-tool.lock"
fi
uv="${tool_venv}/bin/uv"

# One resolution: CPython 3.11 (Debian 12's and this machine's), x86_64
# Linux with glibc >= 2.28 (what torch 2.13's wheels need).
compile() {  # compile NAME [extra uv flags]
  local name=$1; shift
  "${uv}" pip compile -q "${req}/${name}.in" -o "${req}/${name}.lock" \
    --generate-hashes --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --find-links "${find_links}" \
    --custom-compile-command "scripts/lock-deps.sh" "$@"
  echo "lock-deps: ${req}/${name}.lock: $(grep -c '^[a-z0-9].*==' \
    "${req}/${name}.lock") distributions"
}
compile lock-tool
compile dev
compile plain-root
compile vllm --no-emit-package torchvision --no-emit-package torchaudio \
  --no-emit-package torchcodec

if [ "${1:-}" = --python-only ]; then exit 0; fi
# Debian: the version dpkg has of each package debian.in names.
mapfile -t debs < <(sed 's/#.*//' "${req}/debian.in" | tr ' ' '\n' | grep .)
{
  echo "# Written by scripts/lock-deps.sh from debian.in: the versions the"
  echo "# tests ran with, on $(. /etc/os-release && echo "${PRETTY_NAME}")."
  for p in "${debs[@]}"; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) ||
      { echo "lock-deps: Debian package $p is not installed" >&2; exit 1; }
    echo "$p=$v"
  done
} >"${req}/debian.lock"
echo "lock-deps: ${req}/debian.lock: ${#debs[@]} packages"
