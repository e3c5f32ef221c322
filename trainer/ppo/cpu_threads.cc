#include "cpu_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace hy::trainer {

void UseOneCpuThread() {
  at::set_num_threads(1);
  // Present only when libblas.so.3 is OpenBLAS (it loads libopenblas.so.0
  // into the global namespace); absent with the reference BLAS.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(
          dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(1);
  }
}

}  // namespace hy::trainer
