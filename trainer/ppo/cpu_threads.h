// One CPU thread per rank. A rank of the trainer computes on one core: the
// ranks of a host share its cores, so a second thread per rank only
// contends (and OpenBLAS's idle threads spin), and one thread keeps every
// kernel's reduction order fixed, so a run is repeatable.
//
// LibTorch's CPU matrix products go to whatever libblas.so.3 the system
// provides (Debian: the reference BLAS, or OpenBLAS when installed;
// scripts/install-deps.sh installs its single-threaded build, several times
// faster). at::set_num_threads does not reach a threaded OpenBLAS's own
// pool in this build, so this also calls openblas_set_num_threads when
// that library is loaded.
//
// Internal to hy_trainer_ppo. Thread-safety: call before computing, from the
// main thread.

#ifndef HY_TRAINER_PPO_CPU_THREADS_H_
#define HY_TRAINER_PPO_CPU_THREADS_H_

namespace hy::trainer {

// Limits ATen's intra-op pool and (if present) OpenBLAS to one thread.
void UseOneCpuThread();

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_CPU_THREADS_H_
