# Detects the CUDA toolkit (nvcc under /usr/local/cuda by default) and NCCL
# (beside it, or from the Python environment's nvidia-nccl-cu13).
#
#   HY_WITH_CUDA  ON when nvcc is found; -DHY_WITH_CUDA=OFF forces it off.
#   HY_WITH_NCCL  ON when HY_WITH_CUDA and nccl.h + libnccl are found.
#   hy::nccl      imported target for NCCL (when HY_WITH_NCCL).
#
# GPU code must build wherever the toolkit is present, and tests that need a
# GPU skip at run time when none is visible.
set(HY_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root")

set(_hy_cuda_default OFF)
if(EXISTS "${HY_CUDA_ROOT}/bin/nvcc")
  set(_hy_cuda_default ON)
endif()
option(HY_WITH_CUDA "Build GPU code (CUDA kernels, NCCL)" ${_hy_cuda_default})

set(HY_WITH_NCCL OFF)
if(HY_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${HY_CUDA_ROOT}/bin/nvcc")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # Ampere and Hopper (A100, H100, H200) plus PTX for anything newer.
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)

  # NCCL beside the toolkit, else the PyPI package nvidia-nccl-cu13 in the
  # Python environment (scripts/install-deps.sh installs it; it ships only
  # libnccl.so.2).
  set(_hy_nccl_hint "")
  if(Python3_EXECUTABLE)
    execute_process(COMMAND "${Python3_EXECUTABLE}" -c
      "import nvidia.nccl as n; print(list(n.__path__)[0])"
      OUTPUT_VARIABLE _hy_nccl_hint OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_path(HY_NCCL_INCLUDE_DIR nccl.h
            HINTS "${HY_CUDA_ROOT}/include" ${CUDAToolkit_INCLUDE_DIRS}
                  "${_hy_nccl_hint}/include")
  find_library(HY_NCCL_LIBRARY NAMES nccl libnccl.so.2
               HINTS "${HY_CUDA_ROOT}/lib64" ${CUDAToolkit_LIBRARY_DIR}
                     "${_hy_nccl_hint}/lib")
  if(HY_NCCL_INCLUDE_DIR AND HY_NCCL_LIBRARY)
    set(HY_WITH_NCCL ON)
    add_library(hy::nccl UNKNOWN IMPORTED)
    set_target_properties(hy::nccl PROPERTIES
      IMPORTED_LOCATION "${HY_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${HY_NCCL_INCLUDE_DIR}")
    # Installed binaries (hyctl: the trainer's NCCL collectives) keep its
    # directory in their RUNPATH, as they do the wheel's LibTorch
    # (HyTorch.cmake): USE_LINK_PATH skips .venv/, inside the source tree.
    get_filename_component(_hy_nccl_lib_dir "${HY_NCCL_LIBRARY}" DIRECTORY)
    list(APPEND CMAKE_INSTALL_RPATH "${_hy_nccl_lib_dir}")
  endif()
endif()
