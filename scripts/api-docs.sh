#!/bin/bash
# The Python package's API reference, from its docstrings, by pdoc (PyPI;
# the version scripts/install-deps.sh pins, so that the output is the same
# everywhere): docs/api/index.html. Warnings are errors. CTest python.api
# checks that docs/api is what this script writes now (rerun it after
# changing a docstring or signature).
#
# Usage: scripts/api-docs.sh [OUT_DIR]   (default docs/api; needs the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/api}
PY=${HY_PYTHON:-.venv/bin/python3}
rm -rf "$out"
PYTHONPATH=${HY_PYTHONPATH:-build/python} "$PY" -W error -m pdoc \
  --no-show-source hystate hystate.dcp hystate.vllm -o "$out"
echo "api-docs: wrote $out"
