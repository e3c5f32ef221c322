# The Python interpreter and LibTorch, both from one place: the virtual
# environment scripts/install-deps.sh makes (.venv/ at the repo root), or
# whatever -DPython3_EXECUTABLE names. LibTorch is the one inside that
# interpreter's PyTorch wheel (torch/include, torch/lib), never a system
# libtorch, so the C++ trainer and the Python package see the same PyTorch.
#
#   HY_WITH_TORCH          ON: build the LibTorch half (c10d transport,
#                          trainer, hyctl, benches); OFF builds the rest
#                          (the pip build of the Python package does).
#   HY_TORCH_VERSION       the wheel's version, e.g. 2.13.0.
#   HY_TORCH_INCLUDE_DIR   torch/include of the wheel (or given by hand, with
#   HY_TORCH_LIBRARY, HY_TORCH_CPU_LIBRARY, HY_C10_LIBRARY).
#   HY_GLOO_INCLUDE_DIR    gloo headers: the wheel's if it ships them, else
#                          Debian's libgloo-dev (see docs/design/build.md).
#   hy_torch_c10d          interface target: ATen + c10d + ProcessGroupGloo.
option(HY_WITH_TORCH "Build the LibTorch half (trainer, c10d transport, hyctl)" ON)

if(NOT DEFINED Python3_EXECUTABLE AND EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python3")
  set(Python3_EXECUTABLE "${PROJECT_SOURCE_DIR}/.venv/bin/python3")
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)

if(NOT HY_WITH_TORCH)
  return()
endif()

if(NOT HY_TORCH_INCLUDE_DIR)
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__.split('+')[0]); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    OUTPUT_VARIABLE _hy_torch OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _hy_torch_err RESULT_VARIABLE _hy_torch_rc)
  if(NOT _hy_torch_rc EQUAL 0)
    message(FATAL_ERROR
      "hy: ${Python3_EXECUTABLE} cannot import torch (run scripts/install-deps.sh, "
      "or pass -DPython3_EXECUTABLE=<python with torch>, or -DHY_WITH_TORCH=OFF):\n"
      "${_hy_torch_err}")
  endif()
  string(REPLACE "\n" ";" _hy_torch "${_hy_torch}")
  list(GET _hy_torch 0 _hy_torch_dir)
  list(GET _hy_torch 1 HY_TORCH_VERSION)
  list(GET _hy_torch 2 _hy_torch_abi)
  if(HY_TORCH_VERSION VERSION_LESS 2.4)
    message(FATAL_ERROR "hy: torch ${HY_TORCH_VERSION} at ${_hy_torch_dir}; hy needs torch >= 2.4")
  endif()
  if(NOT _hy_torch_abi EQUAL 1)
    message(FATAL_ERROR "hy: torch ${HY_TORCH_VERSION} was built with the pre-C++11 "
      "string ABI; hy links Debian's libraries (C++11 ABI): use a torch wheel with "
      "torch._C._GLIBCXX_USE_CXX11_ABI true (every PyPI wheel since 2.7)")
  endif()
  set(HY_TORCH_INCLUDE_DIR "${_hy_torch_dir}/include" CACHE PATH "LibTorch headers")
  set(HY_TORCH_LIBRARY "${_hy_torch_dir}/lib/libtorch.so" CACHE FILEPATH "")
  set(HY_TORCH_CPU_LIBRARY "${_hy_torch_dir}/lib/libtorch_cpu.so" CACHE FILEPATH "")
  set(HY_C10_LIBRARY "${_hy_torch_dir}/lib/libc10.so" CACHE FILEPATH "")
  set(HY_TORCH_VERSION "${HY_TORCH_VERSION}" CACHE STRING "PyTorch version" FORCE)
endif()
# Headers given by hand (-DHY_TORCH_INCLUDE_DIR=...): the version comes from
# them (torch/headeronly/version.h since 2.9, the C++ API's before).
if(NOT HY_TORCH_VERSION)
  foreach(h torch/headeronly/version.h torch/csrc/api/include/torch/version.h)
    if(EXISTS "${HY_TORCH_INCLUDE_DIR}/${h}")
      file(STRINGS "${HY_TORCH_INCLUDE_DIR}/${h}" _hy_torch_v
           REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) [0-9]+")
      string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*"
             "\\1.\\2.\\3" _hy_torch_v "${_hy_torch_v}")
      if(_hy_torch_v MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
        set(HY_TORCH_VERSION "${_hy_torch_v}")
        break()
      endif()
    endif()
  endforeach()
  if(NOT HY_TORCH_VERSION)
    message(FATAL_ERROR "hy: no torch version header under ${HY_TORCH_INCLUDE_DIR} "
      "(is it a PyTorch wheel's torch/include?)")
  elseif(HY_TORCH_VERSION VERSION_LESS 2.4)
    message(FATAL_ERROR "hy: torch ${HY_TORCH_VERSION} headers at ${HY_TORCH_INCLUDE_DIR}; "
      "hy needs torch >= 2.4")
  endif()
endif()
foreach(f HY_TORCH_LIBRARY HY_TORCH_CPU_LIBRARY HY_C10_LIBRARY)
  if(NOT EXISTS "${${f}}")
    message(FATAL_ERROR "hy: ${f} = ${${f}} does not exist")
  endif()
endforeach()

# Gloo: ProcessGroupGloo.hpp includes <gloo/...>; wheels since 2.x do not
# ship those headers. Debian's libgloo-dev stands in (headers only: gloo's
# code is the copy linked into libtorch_cpu).
find_path(HY_GLOO_INCLUDE_DIR gloo/transport/device.h
          HINTS "${HY_TORCH_INCLUDE_DIR}" NO_CACHE)
if(NOT HY_GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "hy: no gloo headers (install Debian's libgloo-dev)")
endif()

# The C++ standard LibTorch's headers ask for (ATen.h stops the build below
# it): C++17 up to torch 2.13, C++20 from 2.14. Targets that use LibTorch
# get it through hy_torch_c10d; the rest of hy stays C++17 (one compiler,
# one standard library: TUs of the two standards link together).
file(STRINGS "${HY_TORCH_INCLUDE_DIR}/ATen/ATen.h" _hy_aten_std
     REGEX "__cplusplus < [0-9]+L")
set(HY_TORCH_CXX_STANDARD 17)
if(_hy_aten_std MATCHES "__cplusplus < ([0-9]+)L" AND CMAKE_MATCH_1 GREATER_EQUAL 202002)
  set(HY_TORCH_CXX_STANDARD 20)
endif()

add_library(hy_torch_c10d INTERFACE IMPORTED GLOBAL)
target_compile_features(hy_torch_c10d INTERFACE cxx_std_${HY_TORCH_CXX_STANDARD})
target_include_directories(hy_torch_c10d SYSTEM INTERFACE
  ${HY_TORCH_INCLUDE_DIR}
  # torch >= 2.5's c10d headers include torch/types.h from the C++ API.
  ${HY_TORCH_INCLUDE_DIR}/torch/csrc/api/include
  ${HY_GLOO_INCLUDE_DIR})
# ProcessGroupGloo.hpp is empty unless this is set (as LibTorch was built).
target_compile_definitions(hy_torch_c10d INTERFACE USE_C10D_GLOO)
# Warnings that new compilers raise inside LibTorch's own headers (c10's
# SmallVector under gcc 13's -Warray-bounds, inlined into hy's code) are
# LibTorch's: reported, never fatal. So is gcc 12's -Wrestrict inside
# libstdc++'s std::string operator+ in C++20 mode (GCC bug 105329), which
# the C++20 that torch >= 2.14 asks for brings out. hy's own -Werror stays
# for the rest.
target_compile_options(hy_torch_c10d INTERFACE
  $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-error=array-bounds -Wno-error=stringop-overflow -Wno-error=maybe-uninitialized -Wno-error=restrict>)
target_link_libraries(hy_torch_c10d INTERFACE
  ${HY_TORCH_LIBRARY} ${HY_TORCH_CPU_LIBRARY} ${HY_C10_LIBRARY})
# The wheel's libtorch.so and libtorch_cpu.so export copies of parts of
# libstdc++ (std::filesystem: 64 and 142 symbols in torch 2.11, statically
# linked from the toolchain they were built with). Listed before
# libstdc++.so.6 in a binary's DT_NEEDED, they win the symbol lookup, so
# hy's own std::filesystem calls would run LibTorch's copies; torch 2.11's
# libtorch.so remove_all calls a weak symbol that no libstdc++ exports
# (recursive_directory_iterator::__erase) and jumps to address 0 on a
# non-empty directory. libstdc++.so.6 goes first instead, as a link option
# (before the objects and every library), kept where the linker defaults to
# --as-needed (Ubuntu's). CTest install.stdlib_binding checks it.
target_link_options(hy_torch_c10d INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state>)
# Installed binaries keep the wheel's lib/ in their RUNPATH: `cmake
# --install`'s hyctl runs on the same LibTorch (CMake's USE_LINK_PATH skips
# it when the environment lies inside the source tree, as .venv/ does).
get_filename_component(_hy_torch_lib_dir "${HY_TORCH_CPU_LIBRARY}" DIRECTORY)
list(APPEND CMAKE_INSTALL_RPATH "${_hy_torch_lib_dir}")
message(STATUS "hy: LibTorch ${HY_TORCH_VERSION} from ${HY_TORCH_INCLUDE_DIR} "
  "(C++${HY_TORCH_CXX_STANDARD}); gloo headers ${HY_GLOO_INCLUDE_DIR}")

# ---- One precompiled header for the LibTorch translation units ----------------
# ATen.h takes ~8 s to parse on this machine (2 cores), more than half of a
# trainer TU's compile time, and 20 of the trainer's and c10d's TUs include
# it. Those libraries reuse one PCH of it (built once, from hy_torch_pch)
# through hy_use_torch_pch(target); it is force-included, and a TU keeps its
# own includes (they cost nothing after it). Only ATen.h: c10d's Gloo and
# autograd's custom functions are each in two or three TUs, and a larger PCH
# costs every small TU more to load than it saves (GCC maps the whole
# file: ~4 s for a 570 MB one). Executables (tests, benches) are compiled
# as PIE and cannot use a PIC library's PCH; they parse the headers.
# -DHY_TORCH_PCH=OFF compiles without it (same objects, slower).
option(HY_TORCH_PCH "Precompile LibTorch's ATen.h once for its users" ON)
if(HY_TORCH_PCH)
  add_library(hy_torch_pch OBJECT "${CMAKE_CURRENT_LIST_DIR}/hy_torch_pch.cc")
  target_link_libraries(hy_torch_pch PRIVATE hy_torch_c10d)
  target_precompile_headers(hy_torch_pch PRIVATE <ATen/ATen.h>)
endif()

# hy_use_torch_pch(target [SKIP source...]): `target`, a library, compiles
# against hy_torch_pch's PCH, except the SKIP sources (those that do not
# include ATen.h: loading the PCH would cost them more than they parse).
# REQUIRES: target is a static or shared library (PIC) that links
# hy_torch_c10d (or hy_torch_api) and has no PCH of its own.
function(hy_use_torch_pch target)
  cmake_parse_arguments(ARG "" "" "SKIP" ${ARGN})
  if(NOT HY_TORCH_PCH)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM hy_torch_pch)
  if(ARG_SKIP)
    set_source_files_properties(${ARG_SKIP} TARGET_DIRECTORY ${target}
                                PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  # GCC says so when it cannot use the PCH (other flags) instead of
  # silently parsing the headers again; ccache needs the PCH named in the
  # preprocessed output to cache these TUs.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Winvalid-pch -Wno-error=invalid-pch -fpch-preprocess>)
endfunction()
