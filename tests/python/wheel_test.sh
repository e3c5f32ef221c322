#!/bin/bash
# The wheel a user installs anywhere: `pip wheel .` (reusing the build dir
# of CTest's pip install), `auditwheel repair` (RocksDB, zstd, yaml-cpp,
# prometheus-cpp, ... copied into the wheel, a manylinux tag), then, in a
# plain Debian root made here by debootstrap (minbase with python3, venv
# and pip: none of hy's libraries or -dev packages), a fresh virtual
# environment installs the wheel (and numpy and PyTorch's CPU wheel, as
# requirements/plain-root.lock pins them, from wheels fetched here: the
# root gets no network configuration), runs
# plain_root_check.py (save, load, load under another sharding, plan,
# verify; numpy only), plain_root_hy_vllm_check.py (hy_vllm is in the
# wheel: `python -m hy_vllm.serve --print` without vLLM or the repository)
# and then every script in examples/ through
# tests/examples/examples_test.sh (torchrun for the multi-rank ones).
#
# Usage: wheel_test.sh PYTHON SOURCE_DIR PIP_BUILD_DIR WORKDIR
#   exit 0 pass, 77 skip (not root: chroot and mounts need it).
set -eu
set -o pipefail
PY=${1:?usage}
PYDIR=$(cd "$(dirname "$PY")" && pwd)  # Not readlink: a venv's python is a link.
PY=$PYDIR/$(basename "$PY")
SRC=${2:?usage}
PIP_BUILD=${3:?usage}
W=${4:?usage}
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: not root (debootstrap and chroot need it)"; exit 77
fi
rm -rf "$W"
mkdir -p "$W/dist" "$W/repaired"
echo "== pip wheel"
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$W/dist" \
  -C build-dir="$PIP_BUILD" "$SRC"
echo "== auditwheel repair"
PATH="$PYDIR:$PATH" "$PY" -m auditwheel repair \
  -w "$W/repaired" "$W"/dist/hystate-*.whl 2>&1 | grep -v '^INFO' || true
whl=$(ls "$W"/repaired/hystate-*manylinux*.whl)
echo "wheel: $(basename "$whl"), $(stat -c %s "$whl") bytes"
"$PY" - "$whl" <<'PYEOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
libs = [i for i in z.infolist() if i.filename.startswith("hystate.libs/")]
for i in libs:
    print(f"  {i.filename:<58} {i.file_size:>10} bytes")
names = " ".join(i.filename for i in libs)
for need in ("librocksdb", "libzstd", "libyaml-cpp"):
    assert need in names, f"{need} is not inside the wheel"
files = set(z.namelist())
for need in ("__init__.py", "serve.py", "worker.py", "auth.py", "py.typed"):
    assert f"hy_vllm/{need}" in files, f"hy_vllm/{need} is not inside the wheel"
print("  hy_vllm/: " + " ".join(sorted(f[8:] for f in files if f.startswith("hy_vllm/"))))
PYEOF

echo "== debootstrap a plain root"
root="$W/root"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip \
  bookworm "$root" http://deb.debian.org/debian >"$W/debootstrap.log" 2>&1 ||
  { tail -20 "$W/debootstrap.log"; echo "debootstrap failed"; exit 1; }
if ls "$root"/usr/lib/x86_64-linux-gnu | grep -q 'librocksdb\|libyaml-cpp'; then
  echo "the plain root has hy's libraries"; exit 1
fi
root_py=$(chroot "$root" python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
if [[ $(basename "$whl") != *-cp${root_py}-* ]]; then
  echo "the wheel is not for the root's Python 3 (cp$root_py): $(basename "$whl")"
  exit 1
fi
mkdir -p "$root/tmp/wheels" "$root/tmp/hy/tests/examples"
cp "$whl" "$SRC/tests/python/plain_root_check.py" \
  "$SRC/tests/python/plain_root_hy_vllm_check.py" "$root/tmp/"
cp -r "$SRC/examples" "$root/tmp/hy/"
cp "$SRC/tests/examples/examples_test.sh" "$root/tmp/hy/tests/examples/"
# numpy and torch for the root, as requirements/plain-root.lock pins them
# (hash-checked; the lock is for CPython 3.11, Debian 12's).
if [[ $root_py != 311 ]]; then
  echo "requirements/plain-root.lock is for cp311, the root has cp$root_py"; exit 1
fi
"$PY" -m pip download --quiet --only-binary :all: --no-deps --require-hashes \
  --python-version 3.11 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform linux_x86_64 \
  -d "$root/tmp/wheels" -r "$SRC/requirements/plain-root.lock" \
  2> >(grep -v "^WARNING: Location" >&2)
cp "$SRC/requirements/plain-root.lock" "$root/tmp/"
numpy_pin=$(grep -o '^numpy==[^ ]*' "$SRC/requirements/plain-root.lock")

echo "== in the plain root: venv, pip install the wheel, save/load/verify"
in_root() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    unshare -m --propagation private sh -c "
      mount --rbind /dev '$root/dev' && mount -t proc proc '$root/proc' &&
      chroot '$root' /bin/sh -c '$1'"
}
in_root 'cd /tmp && python3 -m venv /v &&
  /v/bin/pip install -q --no-index --find-links /tmp/wheels --no-deps \
    /tmp/hystate-*.whl '"$numpy_pin"' &&
  /v/bin/python /tmp/plain_root_check.py &&
  /v/bin/python -m hystate --version' | tee "$W/check.log"
grep -q "^ok: hystate" "$W/check.log"
echo "== in the plain root: hy_vllm from the wheel (no vLLM, no repository)"
in_root 'cd / && /v/bin/python /tmp/plain_root_hy_vllm_check.py' |
  tee "$W/hy_vllm.log"
grep -q "^ok: hy_vllm" "$W/hy_vllm.log"
echo "== in the plain root: PyTorch, then every example"
in_root '/v/bin/pip install -q --no-index --find-links /tmp/wheels --no-deps \
    --require-hashes -r /tmp/plain-root.lock &&
  bash /tmp/hy/tests/examples/examples_test.sh /v/bin/python /tmp/examples' |
  tee "$W/examples.log"
grep -q "^examples: all passed" "$W/examples.log"
rm -rf "$root"  # 300 MB.
echo "wheel: installs and works in a plain root"
