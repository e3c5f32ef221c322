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
# 3. The trainer on cuda: TrainerDistTest.FsdpStepOnCudaMatchesTheCpu (an
#    FSDP step on the GPU against the CPU's), the README demo with
#    `--device cuda --nproc 1` (its reward curve: mean of the first 10 vs
#    the last 10 iterations), and a Qwen2-0.5B-shaped GRPO run of 3
#    iterations with a checkpoint at the last; a table of each run's
#    iteration time and phases, rollout tokens/s, checkpoint blocking and
#    durable time, reshard time, and the GPU's peak memory (nvidia-smi,
#    sampled every 100 ms). Logs: $OUT/demo-cuda.log, $OUT/grpo-0.5b.log,
#    the table in $OUT/bench.log.
# STOP_AFTER_TESTS=1 skips part 3; DEMO_ITERS (100) shortens the demo.
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
hy_reshard_c10d_test hy_reshard_c10d_worker hy_trainer_dist_test \
hy_trainer_test_worker"}
export TEST_RE=${TEST_RE:-'^(GpuTest\.|GpuSaveTest\.|PinnedStagingTest\.|reshard\.nccl\.|reshard\.c10d\.|trainer\.TrainerDistTest\.(FsdpStepOnCuda|EqualSize))'}
bash "$KIT/run.sh"
rc=$?
LD=$SYSROOT/usr/lib/x86_64-linux-gnu:/tmp/ncclshim
# Issue 32: where each shared object of a Python process with torch and hy
# comes from (the image's, the wheel's, or the kit's sysroot), and, if
# pytest died of a signal, the native stack of hystate.save there (gdb when the
# image has it, else faulthandler's Python stack of every thread).
PY=${PY:-$(command -v python3)}
PYTHONPATH=$B/python LD_DEBUG=libs "$PY" -c 'import torch, numpy, hystate' 2>&1 |
  grep -o 'calling init: .*' | sort -u >"$OUT/py-libs.log"
echo "python process: $(wc -l <"$OUT/py-libs.log") libraries;" \
  "from the sysroot: $(grep -c "$SYSROOT" "$OUT/py-libs.log")" | tee -a "$OUT/summary.txt"
# And where hystate._hy's std:: references bind in that process (a copy exported
# by a library ahead of libstdc++, as torch 2.11's libtorch.so's broken
# std::filesystem was for hy's LibTorch binaries, would show here).
dbg_dir=$(mktemp -d)
PYTHONPATH=$B/python LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT=$dbg_dir/ld \
  "$PY" -c 'import torch, numpy, hystate' >/dev/null 2>&1
cat "$dbg_dir"/ld.* 2>/dev/null | grep -E "binding file [^ ]*/_hy[^ ]* \[" |
  sed -nE "s#.* to ([^ ]+) \[[0-9]+\]: normal symbol \`(_Z(N|NK|TI|TV|TS)?St[^']*)'.*#\1#p" |
  sort | uniq -c >"$OUT/py-std-bindings.log"
rm -rf "$dbg_dir"
echo "hystate._hy std:: symbols bound to: $(tr -s ' ' <"$OUT/py-std-bindings.log" | tr '\n' ';')" |
  tee -a "$OUT/summary.txt"
if grep -qE 'Fatal Python error|Segmentation fault|rc=139' "$OUT/pytest.log" "$OUT/summary.txt"; then
  crash='import torch, numpy as np, hystate, tempfile
d = tempfile.mkdtemp()
hystate.save(d + "/s", {"w": torch.randn(64, 64).bfloat16(), "b": torch.randn(64), "n": np.arange(9)})
print("hystate.save returned")'
  if command -v gdb >/dev/null; then
    PYTHONPATH=$B/python timeout 120 gdb -q -batch -ex run -ex 'info sharedlibrary' \
      -ex 'thread apply all bt 30' --args "$PY" -c "$crash" >"$OUT/py-crash.log" 2>&1
  else
    PYTHONPATH=$B/python timeout 120 "$PY" -X faulthandler -c "$crash" >"$OUT/py-crash.log" 2>&1
  fi
  echo "issue 32: native stack of the crash in $OUT/py-crash.log" | tee -a "$OUT/summary.txt"
fi
echo "== hy_bench_gpu_save" | tee -a "$OUT/bench.log"
for args in "" "--json"; do
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$LD timeout 120 "$B/bin/hy_bench_gpu_save" \
    --size-mib "${GPU_SAVE_MIB:-1024}" --reps 3 $args 2>&1 | tee -a "$OUT/bench.log" ||
    rc=1
done
grep -A8 "hy_bench_reshard_nccl" "$OUT/bench.log" | head -20
[ "${STOP_AFTER_TESTS:-0}" = 1 ] && exit $rc

# ---- 3. The trainer on cuda --------------------------------------------------
export LD_LIBRARY_PATH=$LD
H=$B/bin/hyctl
# Peak GPU memory of a run: nvidia-smi sampled every 100 ms meanwhile.
sampled() {  # sampled NAME COMMAND...: runs it, writes $OUT/NAME.mem
  local name=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
    >"$OUT/$name.mem" 2>/dev/null &
  local smi=$!
  "$@"; local r=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  return $r
}
echo "== demo on cuda" | tee -a "$OUT/bench.log"
D=/tmp/hy-demo-cuda; rm -rf "$D"
HYCTL=$H HY_DEMO_DIR=$D sampled demo-cuda timeout 300 bash scripts/demo.sh \
  --device cuda --nproc 1 --metrics-port -1 -o json \
  --iterations "${DEMO_ITERS:-100}" --set rollout.tensor_model_parallel_size=1 \
  >"$OUT/demo-cuda.log" 2>&1 || { rc=1; tail -20 "$OUT/demo-cuda.log"; }
echo "== 0.5B GRPO on cuda" | tee -a "$OUT/bench.log"
G=/tmp/hy-grpo-cuda; rm -rf "$G"; mkdir -p "$G"
# configs/scale-qwen2-0.5b.yaml's model on the built-in task (no tokenizer
# files needed), one GPU, a checkpoint at iteration 3.
sed -e '/^data:/,/^[a-z]/{/^data:/d;/^  /d}' configs/scale-qwen2-0.5b.yaml \
  >"$G/config.yaml"
sampled grpo-0.5b timeout 300 "$H" train --config "$G/config.yaml" \
  --device cuda --nproc 1 --iterations 3 --metrics-port -1 -o json \
  --store "$G/store" --set rollout.tensor_model_parallel_size=1 \
  --set trainer.offload_rollout=false --set checkpoint.save_every=3 \
  --set rollout.response_length=16 --set model.max_position_embeddings=64 \
  >"$OUT/grpo-0.5b.log" 2>&1 || { rc=1; tail -20 "$OUT/grpo-0.5b.log"; }
python3 - "$OUT" <<'PY' | tee -a "$OUT/bench.log"
import json, sys, os
out = sys.argv[1]
def rows(name):
    it, val = [], []
    for line in open(os.path.join(out, name + ".log"), errors="replace"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        (val if "validation" in j else it).append(j)
    return it, val
def peak(name):
    try:
        v = [float(x) for x in open(os.path.join(out, name + ".mem")) if x.strip()]
        return max(v) if v else float("nan")
    except OSError:
        return float("nan")
print("| run | iters | iteration ms | rollout ms | train ms | reshard ms | "
      "ckpt blocking ms | ckpt durable ms | tokens/s | peak GPU MiB |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name in ("demo-cuda", "grpo-0.5b"):
    it, val = rows(name)
    if not it:
        print(f"| {name} | 0 | (no iterations: see {name}.log) |||||||| {peak(name):.0f} |")
        continue
    tail = it[1:] or it  # The first iteration warms up.
    mean = lambda k: sum((r.get(k) or 0) for r in tail) / len(tail)
    ck = [r for r in it if r.get("checkpoint_ms")]
    durable = max((r.get("checkpoint_durable_ms") or 0) for r in it)
    print(f"| {name} | {len(it)} | {mean('iteration_ms'):.0f} | {mean('rollout_ms'):.0f} | "
          f"{mean('train_ms'):.0f} | {mean('reshard_ms'):.1f} | "
          f"{max((r['checkpoint_ms'] for r in ck), default=0):.1f} | {durable:.0f} | "
          f"{mean('tokens_per_second'):.0f} | {peak(name):.0f} |")
    if name == "demo-cuda" and len(it) >= 20:
        r = [x["reward_mean"] for x in it]
        print(f"demo on cuda: reward mean of the first 10 {sum(r[:10])/10:.3f}, "
              f"of the last 10 {sum(r[-10:])/10:.3f}")
    for v in val:
        print(f"{name}: held-out after {v['validation']['iteration']}: "
              f"exact match {v['validation']['exact_match']:.3f}")
PY
exit $rc
