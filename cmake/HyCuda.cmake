# Detects the CUDA toolkit (nvcc and NCCL under /usr/local/cuda by default).
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

  find_path(HY_NCCL_INCLUDE_DIR nccl.h
            HINTS "${HY_CUDA_ROOT}/include" ${CUDAToolkit_INCLUDE_DIRS})
  find_library(HY_NCCL_LIBRARY nccl
               HINTS "${HY_CUDA_ROOT}/lib64" ${CUDAToolkit_LIBRARY_DIR})
  if(HY_NCCL_INCLUDE_DIR AND HY_NCCL_LIBRARY)
    set(HY_WITH_NCCL ON)
    add_library(hy::nccl UNKNOWN IMPORTED)
    set_target_properties(hy::nccl PROPERTIES
      IMPORTED_LOCATION "${HY_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${HY_NCCL_INCLUDE_DIR}")
  endif()
endif()
