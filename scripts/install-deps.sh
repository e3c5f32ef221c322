#!/usr/bin/env bash
# Installs every Debian package hy needs to build and test. Idempotent: when
# everything is already installed it only checks (no apt-get update) and exits.
#
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

packages=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config
  # clang + libFuzzer runtime for the decoder fuzz target.
  clang libclang-rt-14-dev
  # Storage and codec.
  librocksdb-dev libzstd-dev libxxhash-dev zstd
  # Tests, benchmarks, CLI, config.
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  # Metrics: HTTP exporter and Pushgateway client (civetweb), gzip (zlib);
  # the real Prometheus server, promtool and Pushgateway for the tests.
  libcivetweb-dev zlib1g-dev prometheus prometheus-pushgateway
  # Model rules (YAML).
  libyaml-cpp-dev
  # LibTorch (CPU) with c10d: TCPStore, ProcessGroupGloo (needs gloo headers).
  libtorch-dev libgloo-dev
  # PyTorch for Python: the independent reference of the decoder's math in
  # the tests (tests/trainer/torch/hf_reference.py).
  python3-torch
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
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
