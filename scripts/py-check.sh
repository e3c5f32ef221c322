#!/bin/bash
# On a machine with PyTorch >= 2.0 (the GPU machine the device tool lends):
# builds the Python package hy against that machine's python3 and runs the
# Python tests, hy.dcp's included (they skip on Debian's torch 1.13), then
# the peer bench. Needs the C++ build dependencies (scripts/install-deps.sh
# where apt works).
#
#   scripts/py-check.sh [build dir, default build-py]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-py}
py=$(command -v python3)
"$py" -c 'import torch; print("torch", torch.__version__)'
cmake -B "$build" -G Ninja -DHY_BUILD_BENCH=OFF -DHY_BUILD_FUZZ=OFF \
  -DPython3_EXECUTABLE="$py" > "$build.configure.log"
cmake --build "$build" --target hy_python
export PYTHONPATH=$PWD/$build/python
"$py" -m pytest -q -rs tests/python
"$py" bench/py_bench_save.py --gib "${HY_PY_BENCH_GIB:-1}"
