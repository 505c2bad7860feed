# Installation and packaging.
#
# `cmake --install build --prefix P` makes a relocatable tree:
#   bin/                  samples, test suites, benchmarks (RUNPATH $ORIGIN/../lib)
#   lib/                  libtessel.so (RUNPATH $ORIGIN) and the Abseil / Google
#                         Benchmark shared libraries it and the programs need
#   lib/cmake/tessel/     tesselConfig.cmake: find_package(tessel CONFIG) -> tessel::tessel
#   include/tessel/       tessel.h and the public headers (cmake/headers.cmake)
#   share/tessel/         bench/*.py, gpu_run.sh, samples.txt, benchmarks.txt
# and `cpack` archives it as tessel-<version>-Linux-<arch>.tar.xz. LLVM is
# linked into libtessel.so, so the tree runs where neither LLVM nor Abseil is
# installed (Ubuntu 24.04 on the GPU machine). Building *against* the tree
# still needs the Abseil headers and CMake files (libabsl-dev), because
# tessel's headers use absl::Status.

include(CMakePackageConfigHelpers)

# Fixed, not CMAKE_INSTALL_LIBDIR: the programs find their libraries through
# $ORIGIN/../lib whatever the prefix, and Debian's multiarch libdir would break that.
set(TESSEL_INSTALL_LIBDIR lib)
set(TESSEL_INSTALL_CMAKEDIR ${TESSEL_INSTALL_LIBDIR}/cmake/tessel)
set(TESSEL_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tessel)
set(TESSEL_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/tessel)
option(TESSEL_BUNDLE_RUNTIME_DEPS
  "Copy the Abseil and Google Benchmark shared libraries the installed binaries need into lib/" ON)

install(TARGETS tessel EXPORT tesselTargets
  LIBRARY DESTINATION ${TESSEL_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel)

# Public headers keep their source-relative path ("dsl/builder.h") under
# include/tessel/ (the list is cmake/headers.cmake's); the umbrella header
# sits at include/tessel/tessel.h.
install(FILES ${PROJECT_SOURCE_DIR}/include/tessel/tessel.h DESTINATION ${TESSEL_INSTALL_INCLUDEDIR} COMPONENT devel)
foreach(_header IN LISTS TESSEL_PUBLIC_HEADERS)
  get_filename_component(_dir ${_header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_header} DESTINATION ${TESSEL_INSTALL_INCLUDEDIR}/${_dir} COMPONENT devel)
endforeach()

# CMake package files.
install(EXPORT tesselTargets NAMESPACE tessel:: DESTINATION ${TESSEL_INSTALL_CMAKEDIR} COMPONENT devel)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tesselConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tesselConfig.cmake
  INSTALL_DESTINATION ${TESSEL_INSTALL_CMAKEDIR})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tesselConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tesselConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tesselConfigVersion.cmake
  DESTINATION ${TESSEL_INSTALL_CMAKEDIR} COMPONENT devel)

# Scripts run on the GPU machine, and the lists of programs they run.
file(GLOB _tessel_bench_scripts CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/*.py)
if(_tessel_bench_scripts)
  install(PROGRAMS ${_tessel_bench_scripts} DESTINATION ${TESSEL_INSTALL_DATADIR} COMPONENT benchmarks)
endif()
if(EXISTS ${PROJECT_SOURCE_DIR}/scripts/gpu_run.sh)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/gpu_run.sh DESTINATION ${TESSEL_INSTALL_DATADIR} COMPONENT runtime)
endif()
# samples.txt and benchmarks.txt name the installed programs of each kind.
function(_tessel_list_programs dir enabled list)
  set(names "")
  if(${enabled})
    get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type STREQUAL "EXECUTABLE")
        string(APPEND names "${target}\n")
      endif()
    endforeach()
  endif()
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${list}.txt "${names}")
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${list}.txt DESTINATION ${TESSEL_INSTALL_DATADIR} COMPONENT runtime)
endfunction()
_tessel_list_programs(samples TESSEL_BUILD_SAMPLES samples)
_tessel_list_programs(bench TESSEL_BUILD_BENCHMARKS benchmarks)

# Bundle the shared libraries that Ubuntu 24.04 lacks: Abseil (Debian's
# 20220623 build, also what libtessel.so was linked against) and Google
# Benchmark, with every symlink name a DT_NEEDED entry uses. Runs after the
# programs are installed (install rules run in declaration order, CMP0082),
# and reads what they need from the installed files themselves.
# Each bundled library gets RUNPATH $ORIGIN (with patchelf): Abseil's libraries
# need one another, and a RUNPATH serves only the object that carries it, so
# without it libabsl_status.so would look for libabsl_strerror.so in the system.
if(TESSEL_BUNDLE_RUNTIME_DEPS)
  find_program(TESSEL_PATCHELF patchelf)
  string(CONCAT _tessel_bundle_code
    "set(_tessel_patchelf \"${TESSEL_PATCHELF}\")\n"
    "set(_tessel_lib \"${TESSEL_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:tessel>\")\n"
    "set(_tessel_libdir \"${TESSEL_INSTALL_LIBDIR}\")\n"
    "set(_tessel_bindir \"${CMAKE_INSTALL_BINDIR}\")\n"
    [[
set(_root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
file(GLOB _files LIST_DIRECTORIES false "${_root}/${_tessel_bindir}/*")
set(_exes "")
foreach(_f IN LISTS _files)
  file(READ "${_f}" _magic LIMIT 4 HEX)
  if(_magic STREQUAL "7f454c46")  # ELF; bin/ may also hold scripts
    list(APPEND _exes "${_f}")
  endif()
endforeach()
file(GET_RUNTIME_DEPENDENCIES
  LIBRARIES "${_root}/${_tessel_lib}"
  EXECUTABLES ${_exes}
  RESOLVED_DEPENDENCIES_VAR _deps
  UNRESOLVED_DEPENDENCIES_VAR _missing
  CONFLICTING_DEPENDENCIES_PREFIX _conflict
  PRE_INCLUDE_REGEXES "^libabsl_" "^libbenchmark"
  PRE_EXCLUDE_REGEXES ".*")
foreach(_name IN LISTS _conflict_FILENAMES)  # the same soname seen in two places: take the first
  list(GET _conflict_${_name} 0 _first)
  list(APPEND _deps "${_first}")
endforeach()
if(_missing)
  message(FATAL_ERROR "tessel: cannot find ${_missing} to bundle (install libabsl-dev and libbenchmark-dev)")
endif()
if(_deps AND NOT _tessel_patchelf)
  message(FATAL_ERROR "tessel: bundling shared libraries needs patchelf: apt-get install patchelf")
endif()
set(_count 0)
foreach(_dep IN LISTS _deps)
  string(FIND "${_dep}" "${_root}/" _at)
  if(_at EQUAL 0)  # already in this tree (a repeated install)
    continue()
  endif()
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${_tessel_libdir}" TYPE SHARED_LIBRARY
       FOLLOW_SYMLINK_CHAIN FILES "${_dep}")
  file(REAL_PATH "${_dep}" _real)
  get_filename_component(_real_name "${_real}" NAME)
  execute_process(COMMAND "${_tessel_patchelf}" --set-rpath "$ORIGIN" "${_root}/${_tessel_libdir}/${_real_name}"
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "tessel: patchelf failed on ${_root}/${_tessel_libdir}/${_real_name}")
  endif()
  math(EXPR _count "${_count} + 1")
endforeach()
message(STATUS "tessel: bundled ${_count} shared libraries into ${_tessel_libdir}/")
]])
  install(CODE "${_tessel_bundle_code}" COMPONENT runtime)
endif()

# cpack: one relocatable .tar.xz of the whole tree.
set(CPACK_PACKAGE_NAME tessel)
set(CPACK_PACKAGE_VENDOR tessel)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tessel: GPU kernels written with C++ builder calls, compiled at run time")
set(CPACK_PACKAGE_FILE_NAME tessel-${PROJECT_VERSION}-Linux-${CMAKE_SYSTEM_PROCESSOR})
set(CPACK_GENERATOR TXZ)
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
# Not stripped: function names in backtraces from the GPU machine are worth
# the ~2 MB they add to the archive.
set(CPACK_STRIP_FILES OFF)
set(CPACK_THREADS 0)  # xz on every core
set(CPACK_PACKAGE_CHECKSUM SHA256)
set(CPACK_SOURCE_GENERATOR TXZ)
set(CPACK_SOURCE_IGNORE_FILES "/[.]git/" "/build[^/]*/" "/dist/" "/gpu-logs/")
include(CPack)
