# cmake --install: headers, the plain-C++ libraries (no LibTorch: common,
# metrics, statestore, reshard, recovery, checkpoint), a CMake package
# (find_package(hy) gives hy::common, hy::metrics, hy::statestore,
# hy::reshard, hy::recovery, hy::checkpoint) and a pkg-config file (hy.pc), plus hyctl and
# the Python package (python/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HY_EXPORTED common metrics statestore reshard recovery checkpoint)
foreach(m ${HY_EXPORTED})
  set_target_properties(hy_${m} PROPERTIES EXPORT_NAME ${m})
  target_include_directories(hy_${m} PUBLIC
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${m}/include/hy
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  list(APPEND HY_EXPORTED_TARGETS hy_${m})
endforeach()
install(TARGETS ${HY_EXPORTED_TARGETS} EXPORT hyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET hyctl)
  install(TARGETS hyctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(HY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hy)
install(EXPORT hyTargets NAMESPACE hy:: DESTINATION ${HY_CMAKE_DIR})
# The CUDA toolkit hy was built against, for hyConfig.cmake to look in first
# (a consumer's nvcc on PATH may be a wrapper outside the toolkit).
set(HY_CUDA_TOOLKIT_ROOT "")
if(HY_WITH_CUDA AND CUDAToolkit_BIN_DIR)
  get_filename_component(HY_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/hyConfig.cmake INSTALL_DESTINATION ${HY_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hyConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hyConfig.cmake
              ${PROJECT_BINARY_DIR}/hyConfigVersion.cmake
        DESTINATION ${HY_CMAKE_DIR})

# pkg-config: static libraries, so Libs names their dependencies too.
set(HY_PC_CUDA "")
set(HY_PC_CFLAGS "")
if(HY_WITH_CUDA)
  set(HY_PC_CUDA "-L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  set(HY_PC_CFLAGS " -DHY_WITH_CUDA=1")
endif()
file(RELATIVE_PATH HY_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/hy.pc.in
               ${PROJECT_BINARY_DIR}/hy.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hy.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
