# Every dependency comes from a Debian 12 package; a missing one is reported
# with the package that provides it.
function(tessel_require found package what)
  if(NOT ${found})
    message(FATAL_ERROR "tessel needs ${what}: install it with `apt-get install ${package}`")
  endif()
endfunction()

# LLVM's version file matches major.minor exactly, so check the major here.
find_package(LLVM CONFIG QUIET PATHS /usr/lib/llvm-19/lib/cmake/llvm NO_DEFAULT_PATH)
if(LLVM_FOUND AND NOT LLVM_VERSION_MAJOR EQUAL 19)
  set(LLVM_FOUND FALSE)
endif()
tessel_require(LLVM_FOUND llvm-19-dev "LLVM 19")
# lld as a library links AMD code objects in process (codegen/amdgpu/).
find_library(TESSEL_LLD_ELF NAMES liblldELF.a PATHS ${LLVM_LIBRARY_DIR} NO_DEFAULT_PATH)
find_library(TESSEL_LLD_COMMON NAMES liblldCommon.a PATHS ${LLVM_LIBRARY_DIR} NO_DEFAULT_PATH)
find_path(TESSEL_LLD_INCLUDE_DIR lld/Common/Driver.h PATHS ${LLVM_INCLUDE_DIRS} NO_DEFAULT_PATH)
tessel_require(TESSEL_LLD_ELF liblld-19-dev "lld 19 as a library")
tessel_require(TESSEL_LLD_INCLUDE_DIR liblld-19-dev "lld 19's headers")
find_library(TESSEL_ZSTD_STATIC NAMES libzstd.a)
tessel_require(TESSEL_ZSTD_STATIC libzstd-dev "static zstd")
find_package(absl CONFIG QUIET)
tessel_require(absl_FOUND libabsl-dev "Abseil")

# No CUDA toolkit is needed: tessel declares the part of the driver API it
# uses (runtime/cuda/cuda_api.h) and loads libcuda.so.1 at run time. Where
# NVIDIA's headers are installed, a test checks those declarations against
# them; TESSEL_CHECK_CUDA_API=OFF configures as if they were not.
option(TESSEL_CHECK_CUDA_API "Check tessel's CUDA driver API declarations against cuda.h where it is found" ON)
if(TESSEL_CHECK_CUDA_API)
  find_path(TESSEL_CUDA_INCLUDE_DIR cuda.h PATHS /usr/local/cuda/include ENV CUDA_HOME PATH_SUFFIXES include)
endif()

if(TESSEL_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  tessel_require(GTest_FOUND libgtest-dev "GoogleTest")
endif()
if(TESSEL_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG QUIET)
  tessel_require(benchmark_FOUND libbenchmark-dev "Google Benchmark")
endif()

find_program(TESSEL_FILECHECK FileCheck PATHS ${LLVM_TOOLS_BINARY_DIR} NO_DEFAULT_PATH)
find_program(TESSEL_PTXAS ptxas PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)

llvm_map_components_to_libnames(TESSEL_LLVM_LIBS
  core support passes irreader bitwriter target analysis transformutils
  orcjit executionengine
  x86codegen x86asmparser x86desc x86info
  nvptxcodegen nvptxdesc nvptxinfo
  amdgpucodegen amdgpuasmparser amdgpudesc amdgpuinfo
  option debuginfodwarf objcarcopts linker)
# lld's ELF driver carries LTO. LLVM's exported LTO target drags in Polly,
# which Debian does not ship as a static library (nor does tessel need it):
# link the two archives by path instead.
list(APPEND TESSEL_LLVM_LIBS ${LLVM_LIBRARY_DIR}/libLLVMLTO.a ${LLVM_LIBRARY_DIR}/libLLVMExtensions.a)
