# The CUDA backend (-DCOLI_CUDA=ON): kernels compiled by nvcc for one architecture, cuBLAS loaded at run
# time. Included by cmake/backends.cmake.
option(COLI_CUDA "Build the CUDA backend (needs the CUDA toolkit: nvcc and cuBLAS)" OFF)
if(NOT COLI_CUDA)
  coli_backend_add(cuda)
  return()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "COLI_CUDA=ON but no usable CUDA compiler was found: install the CUDA toolkit and put nvcc "
                      "on PATH, or pass -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc; or configure with "
                      "-DCOLI_CUDA=OFF for a CPU-only build")
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(NOT TARGET CUDA::cublas)
  message(FATAL_ERROR "COLI_CUDA=ON: cuBLAS was not found in the CUDA toolkit at ${CUDAToolkit_LIBRARY_DIR}")
endif()

file(GLOB coli_cuda_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
list(FILTER coli_cuda_srcs EXCLUDE REGEX "/(support|entry)\\.cpp$")
add_library(coli_backend_cuda STATIC ${coli_cuda_srcs})
# cuBLAS is loaded with dlopen at backend start (src/backend/cuda/blas.h): only its headers are used here.
target_link_libraries(coli_backend_cuda PUBLIC coli_backend CUDA::cudart_static ${CMAKE_DL_LIBS})
target_include_directories(coli_backend_cuda PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
# One architecture, no fast-math (denormals and IEEE division are part of the formats' exact decoding).
target_compile_options(coli_backend_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills>)
# CMake 3.25 knows no C++20 flag for nvcc: the .cu files are C++17 (they include no C++20 headers).
set_target_properties(coli_backend_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
coli_backend_add(cuda LIBRARY coli_backend_cuda)
