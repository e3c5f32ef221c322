#!/usr/bin/env bash
# The GPU check (issue 38): one command on a GPU machine. Here, first:
#   ../shared/gpu/make-kit.sh && echo /.gpukit/ >> .git/info/exclude
# then there, from the repo root (within about 8 minutes on an H100):
#   bash scripts/gpu-check.sh
# 1. .gpukit/run.sh builds hy against that machine's PyTorch (LibTorch from
#    its wheel, NCCL from the pip package) and runs the GPU tests: the
#    common GPU entry points, the store's SaveAsync of device memory
#    (GpuSaveTest), the NCCL executor, the c10d transport, tests/python;
# 2. hy_bench_gpu_save: a checkpoint of state in GPU memory, SaveAsync's
#    blocking time beside a device-to-host copy of the same bytes into
#    page-locked memory (target <= 1.2x) and the durable time; and
#    hy_bench_reshard_nccl: the reshard on device buffers beside cudaMemcpy
#    (target <= 1.1x; run by run.sh). Tables in $OUT/bench.log and here.
# Not in it yet: the trainer on cuda (the README demo with
# trainer.device=cuda, a 0.5B GRPO run): the trainer's model has no CUDA
# path, and `hyctl train --set trainer.device=cuda` is refused as a
# configuration error (exit 78) naming why.
set -uo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.gpukit}
if [ ! -f "$KIT/run.sh" ]; then
  echo "gpu-check: no $KIT/run.sh; run ../shared/gpu/make-kit.sh where the" \
       "repository is checked out, and copy $KIT here" >&2
  exit 64
fi
export B=${B:-/tmp/hyb} OUT=${OUT:-/tmp/gpukit-out} SYSROOT=${SYSROOT:-/tmp/sysroot}
export TARGETS=${TARGETS:-"hy_python hyctl hy_common_test hy_statestore_test \
hy_reshard_nccl_test hy_bench_reshard_nccl hy_bench_gpu_save \
hy_reshard_c10d_test hy_reshard_c10d_worker"}
export TEST_RE=${TEST_RE:-'^(GpuTest\.|GpuSaveTest\.|PinnedStagingTest\.|reshard\.nccl\.|reshard\.c10d\.)'}
bash "$KIT/run.sh"
rc=$?
LD=$SYSROOT/usr/lib/x86_64-linux-gnu:/tmp/ncclshim
echo "== hy_bench_gpu_save" | tee -a "$OUT/bench.log"
for args in "" "--json"; do
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$LD timeout 120 "$B/bin/hy_bench_gpu_save" \
    --size-mib "${GPU_SAVE_MIB:-1024}" --reps 3 $args 2>&1 | tee -a "$OUT/bench.log" ||
    rc=1
done
grep -A8 "hy_bench_reshard_nccl" "$OUT/bench.log" | head -20
exit $rc
