#!/usr/bin/env bash
# The GPU machine's userland, without its GPU: builds and tests hy here, in
# an Ubuntu 24.04 chroot that has what ../shared/notes/gpu-machine.md lists
# for that machine (Python 3.12.3, glibc 2.39, gcc 13.3, cmake 4, torch
# 2.11.0+cu130 from PyPI in /opt/torch/.venv, numpy 2.5.2, pybind11 from
# pip), through the same kit (../shared/gpu/make-kit.sh, then its run.sh:
# Debian 12 libraries in a sysroot, loaded through DT_RPATH). CI runs
# Debian 12 (Python 3.11, gcc 12); this is where the other stack the issue
# names (Python 3.12, gcc 13, torch 2.11) is built and run. Tests that need a
# GPU skip, as in CI.
#
#   sudo bash scripts/gpu-userland-check.sh        (from the repo root)
#
# Needs root (debootstrap, chroot, bind mounts) and archive.ubuntu.com and
# PyPI. The first run makes the chroot (about 7 minutes); later runs reuse
# it. The kit carries the committed source (git archive HEAD). Then, on 2
# cores: the kit's build of every target (about 18 minutes), CTest with
# TEST_RE (default: everything, about 12 minutes) and the Python tests
# against the build tree. Logs and summary.txt under $OUT.
# Overridable: ROOT (the chroot), OUT, TORCH_SPEC, NUMPY_SPEC, PYBIND_SPEC,
# TEST_RE, JOBS, KEEP_BUILD=1 (build again only what changed),
# STOP_AFTER=chroot (only make the chroot).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-/var/tmp/hy-noble}
OUT=${OUT:-/tmp/gpu-userland-out}
TORCH_SPEC=${TORCH_SPEC:-torch==2.11.0}
NUMPY_SPEC=${NUMPY_SPEC:-numpy==2.5.2}
PYBIND_SPEC=${PYBIND_SPEC:-pybind11}
TEST_RE=${TEST_RE:-.}
JOBS=${JOBS:-$(nproc)}
MIRROR=http://archive.ubuntu.com/ubuntu
die() { echo "gpu-userland-check: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and bind mounts)"
[ -x ../shared/gpu/make-kit.sh ] || die "no ../shared/gpu/make-kit.sh"
in_root() { chroot "$ROOT" env -i HOME=/root LC_ALL=C \
  PATH=/opt/torch/.venv/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c "$1"; }

mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
  umount "${mounted[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
bind() { mkdir -p "$ROOT$1"; mount --bind "$1" "$ROOT$1"; mounted+=("$ROOT$1"); }

# ---- The chroot: Ubuntu 24.04, once -------------------------------------------
if [ ! -x "$ROOT/opt/torch/.venv/bin/python3" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  # Debian 12's debootstrap predates noble; its script is gutsy's, as for jammy.
  s=/usr/share/debootstrap/scripts
  [ -e $s/noble ] || ln -s gutsy $s/noble
  rm -rf "$ROOT"
  # Debian has no Ubuntu keyring; the packages come over plain HTTP from
  # Ubuntu's archive as they do for any Ubuntu image built without one.
  debootstrap --no-check-gpg --variant=minbase --components=main,universe \
    --include=python3,python3-venv,python3-dev,ninja-build,dpkg-dev,ca-certificates,gdb,file,iproute2 \
    noble "$ROOT" "$MIRROR" >"$OUT.debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $OUT.debootstrap.log"
  printf 'deb %s noble main universe\ndeb %s noble-updates main universe\n' \
    "$MIRROR" "$MIRROR" >"$ROOT/etc/apt/sources.list"
  # This machine's extra certificate authorities (an egress proxy's), so
  # that pip inside reaches PyPI as it does here.
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
  cp /etc/resolv.conf "$ROOT/etc/"
  # No services start in a chroot (prometheus' packages would start theirs).
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  bind /proc; bind /sys; bind /dev; bind /dev/pts
  in_root 'export DEBIAN_FRONTEND=noninteractive
    update-ca-certificates >/dev/null && apt-get update -q >/dev/null &&
    apt-get -y -q upgrade >/dev/null && apt-get -y -q install g++-13 prometheus prometheus-pushgateway >/dev/null &&
    ln -sf gcc-13 /usr/bin/gcc && ln -sf gcc-13 /usr/bin/cc &&
    ln -sf g++-13 /usr/bin/g++ && ln -sf g++-13 /usr/bin/c++ &&
    python3 -m venv /opt/torch/.venv && pip install -q --upgrade pip &&
    pip install -q "'"$TORCH_SPEC"'" "'"$NUMPY_SPEC"'" "'"$PYBIND_SPEC"'" pytest cmake \
      "scikit-build-core>=0.10" "tokenizers>=0.20" "transformers>=5" \
      "safetensors>=0.4" "tensorboard>=2.16" "pillow>=10"' ||
    die "setting up $ROOT failed"
  cleanup; mounted=()
fi
[ "${STOP_AFTER:-}" = chroot ] && { echo "gpu-userland-check: $ROOT is ready"; exit 0; }
mkdir -p "$OUT"
bind /proc; bind /sys; bind /dev; bind /dev/pts
# nvcc, so the CUDA code is compiled there too (the kit's run.sh finds it).
if [ -d /usr/local/cuda/bin ]; then
  cuda=$(readlink -f /usr/local/cuda); bind "$cuda"
  ln -sfn "$cuda" "$ROOT/usr/local/cuda"; ln -sfn "$cuda/bin/nvcc" "$ROOT/usr/local/bin/nvcc"
fi

# ---- The kit, its build, the tests ----------------------------------------------
rm -rf "$ROOT/work/kit"
bash ../shared/gpu/make-kit.sh "$ROOT/work/kit" >/dev/null
# The tests read the tokenizer files the repository carries
# (tests/data/tokenizers); nothing beside the source is needed.
[ "${KEEP_BUILD:-}" = 1 ] || rm -rf "$ROOT/tmp/hyb"
in_root "cd /work/kit && OUT=/work/out JOBS=$JOBS B=/tmp/hyb TARGETS=all STOP_AFTER=build \
  bash run.sh" | tee "$OUT/summary.txt"
in_root "python3 --version; g++ --version | head -1; ldd --version | head -1
  python3 -c 'import torch, numpy, pybind11; print(\"torch\", torch.__version__, \"numpy\",
    numpy.__version__, \"pybind11\", pybind11.__version__)'" | tee -a "$OUT/summary.txt"
L=/tmp/sysroot/usr/lib/x86_64-linux-gnu
# pkg-config searches only the sysroot, as in run.sh's configure (the pip
# build of the Python package configures again).
in_root "cd /tmp/hyb && LD_LIBRARY_PATH=$L:/tmp/ncclshim PKG_CONFIG_LIBDIR=$L/pkgconfig:/tmp/sysroot/usr/share/pkgconfig \
  PKG_CONFIG_SYSROOT_DIR=/tmp/sysroot PKG_CONFIG=/tmp/gkbin/pkg-config CMAKE_PREFIX_PATH=/tmp/sysroot/usr ctest -R '$TEST_RE' -j$JOBS \
  --timeout 900 --output-on-failure" >"$OUT/ctest.log" 2>&1 || true
grep -E "tests passed|tests failed" "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
sed -n '/The following tests/,$p' "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
in_root "cd /work/kit/hy && PYTHONPATH=/tmp/hyb/python HYCTL=/tmp/hyb/bin/hyctl \
  python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider tests/python" \
  >"$OUT/pytest.log" 2>&1 || true
tail -n 3 "$OUT/pytest.log" | tee -a "$OUT/summary.txt"
cp -r "$ROOT/work/out/." "$OUT/kit/" 2>/dev/null || true
echo "logs: $OUT"
