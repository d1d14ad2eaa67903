# LibTorch (CPU, c10d + Gloo) is required for libaccel's worker library; the `accel` binary never
# links it and only reports the version found here. NCCL/CUDA are optional (ACCEL_WITH_NCCL).
find_package(Torch REQUIRED)
set(ACCEL_TORCH_VERSION "${Torch_VERSION}")
# LibTorch 2.12 and later refuse to compile below C++20 (#error in ATen's headers).
if(Torch_VERSION VERSION_GREATER_EQUAL 2.12)
  set(CMAKE_CXX_STANDARD 20)
endif()

# c10d's ProcessGroupGloo.hpp includes Gloo's own headers, which Debian ships (libgloo-dev, a
# dependency of libtorch-dev) and pip's torch does not: without them libaccel has no Gloo
# communicator (shared memory and NCCL still work; makeGlooCommunicator says why it throws).
# ACCEL_WITH_GLOO=OFF builds as against pip's torch (scripts/cuda_build.sh does, in CI).
set(ACCEL_WITH_GLOO "AUTO" CACHE STRING "Build the Gloo communicator: AUTO (if its headers are found), OFF")
if(NOT ACCEL_WITH_GLOO STREQUAL "OFF")
  find_path(ACCEL_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS})
endif()
if(ACCEL_GLOO_INCLUDE_DIR AND NOT ACCEL_WITH_GLOO STREQUAL "OFF")
  set(ACCEL_HAVE_GLOO ON)
else()
  set(ACCEL_HAVE_GLOO OFF)
  message(STATUS "accel: this LibTorch ships no Gloo headers (gloo/algorithm.h); building "
                 "without the Gloo communicator")
endif()

set(ACCEL_HAVE_NCCL OFF)
set(ACCEL_HAVE_NCCL_INT 0)
set(ACCEL_CUDA_VERSION "")  # the CUDA toolkit libaccel's NCCL communicator is built with (accel env --check)
# The NCCL communicator works on CUDA tensors, so it needs a LibTorch built with CUDA (its
# TorchConfig sets TORCH_CUDA_LIBRARIES: c10_cuda, ...), not only the toolkit and libnccl.
if(NOT ACCEL_WITH_NCCL STREQUAL "OFF" AND NOT TORCH_CUDA_LIBRARIES)
  if(ACCEL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_WITH_NCCL=ON but this LibTorch (${TORCH_INSTALL_PREFIX}) has no CUDA: "
                        "point CMAKE_PREFIX_PATH at a CUDA build (Debian's libtorch-cuda-dev, or "
                        "pip's torch: python3 -c 'import torch.utils;print(torch.utils.cmake_prefix_path)')")
  endif()
  message(STATUS "accel: this LibTorch has no CUDA; building without the NCCL communicator")
elseif(NOT ACCEL_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  # pip's torch loads NCCL from its nvidia-nccl wheel, which ships libnccl.so.2 and no libnccl.so:
  # scripts/gpu_check.sh points NCCL_HOME there, so that libaccel uses the NCCL torch uses.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(ACCEL_HAVE_NCCL ON)
    set(ACCEL_HAVE_NCCL_INT 1)
    set(ACCEL_CUDA_VERSION "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
    add_library(NCCL::nccl UNKNOWN IMPORTED)
    set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    message(STATUS "accel: NCCL found (${NCCL_LIBRARY}), CUDA ${CUDAToolkit_VERSION}")
  elseif(ACCEL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_WITH_NCCL=ON but CUDA toolkit or NCCL was not found "
                        "(looked in /usr/local/cuda and $NCCL_HOME)")
  else()
    message(STATUS "accel: NCCL/CUDA not found; building without the NCCL communicator")
  endif()
endif()
