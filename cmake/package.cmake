# Installation and packaging.
#
# `cmake --install build --prefix P` makes a relocatable tree:
#   bin/                  samples, test suites, benchmarks (RUNPATH $ORIGIN/../lib)
#   lib/                  libtessel.so (RUNPATH $ORIGIN) and the Abseil / Google
#                         Benchmark shared libraries it and the programs need
#   lib/cmake/tessel/     tesselConfig.cmake: find_package(tessel CONFIG) -> tessel::tessel
#   lib/pkgconfig/        tessel.pc: the same for a plain compiler line
#   include/tessel/       tessel.h and the public headers (cmake/headers.cmake)
#   include/tessel/third_party/absl/
#                         the Abseil headers those include (cmake/bundled_abseil.cmake)
#   share/tessel/         bench/*.py, gpu_run.sh, samples.txt, benchmarks.txt,
#                         abseil/ (Abseil's copyright and license)
# and `cpack` archives it as tessel-<version>-Linux-<arch>.tar.xz. LLVM is
# linked into libtessel.so and Abseil comes with the tree, so programs run and
# code builds against it where neither LLVM nor Abseil is installed (Ubuntu
# 24.04 on the GPU machine).
#
# The build tree is a package too: its tesselConfig.cmake and
# tesselTargets.cmake let find_package(tessel) use it without installing
# (-Dtessel_DIR=build or -DCMAKE_PREFIX_PATH=build), with the system Abseil
# it was built against.

include(CMakePackageConfigHelpers)

# Fixed, not CMAKE_INSTALL_LIBDIR: the programs find their libraries through
# $ORIGIN/../lib whatever the prefix, and Debian's multiarch libdir would break that.
set(TESSEL_INSTALL_LIBDIR lib)
set(TESSEL_INSTALL_CMAKEDIR ${TESSEL_INSTALL_LIBDIR}/cmake/tessel)
set(TESSEL_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tessel)
set(TESSEL_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/tessel)
set(TESSEL_INSTALL_ABSL_INCLUDEDIR ${TESSEL_INSTALL_INCLUDEDIR}/third_party)
option(TESSEL_BUNDLE_RUNTIME_DEPS
  "Copy the Abseil and Google Benchmark shared libraries the installed binaries need into lib/, and the Abseil headers tessel's headers include into include/tessel/third_party/" ON)

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
# The MPI bootstrap is header-only and needs <mpi.h>: installed for programs
# built with MPI, outside the closure whose headers compile on their own.
install(FILES ${PROJECT_SOURCE_DIR}/runtime/plans/mpi_bootstrap.h
  DESTINATION ${TESSEL_INSTALL_INCLUDEDIR}/runtime/plans COMPONENT devel)

# Abseil for code built against the installed tree: the headers tessel's
# headers include, under include/tessel/third_party/ rather than include/, so
# that an install into /usr/local neither overwrites nor hides another Abseil
# there, and, in place of the absl:: targets of a system Abseil, tessel::absl
# (defined by tesselConfig.cmake): those headers and the bundled libraries.
# The build tree keeps the absl:: targets it was built with.
set(_tessel_install_files ${PROJECT_BINARY_DIR}/CMakeFiles/tessel-install)
get_target_property(_tessel_links tessel INTERFACE_LINK_LIBRARIES)
set(_tessel_absl_targets ${_tessel_links})
list(FILTER _tessel_absl_targets INCLUDE REGEX "^absl::")
if(TESSEL_BUNDLE_RUNTIME_DEPS)
  include(${CMAKE_CURRENT_LIST_DIR}/bundled_abseil.cmake)
  list(TRANSFORM _tessel_links REPLACE "^(absl::.+)$" "$<BUILD_INTERFACE:\\1>")
  set_property(TARGET tessel PROPERTY INTERFACE_LINK_LIBRARIES ${_tessel_links} "$<INSTALL_INTERFACE:tessel::absl>")
  foreach(_header IN LISTS TESSEL_ABSL_HEADERS)
    get_filename_component(_dir ${_header} DIRECTORY)
    install(FILES ${TESSEL_ABSL_INCLUDE_DIR}/${_header} DESTINATION ${TESSEL_INSTALL_ABSL_INCLUDEDIR}/${_dir}
            COMPONENT devel)
  endforeach()
  # Abseil's Apache-2.0 license asks that copies of it travel with its files.
  foreach(_file /usr/share/doc/libabsl-dev/copyright /usr/share/common-licenses/Apache-2.0)
    if(EXISTS ${_file})
      install(FILES ${_file} DESTINATION ${TESSEL_INSTALL_DATADIR}/abseil COMPONENT devel)
    endif()
  endforeach()
  set(TESSEL_CONFIG_ABSL_LIBRARIES ${TESSEL_ABSL_LIBRARIES})
  set(TESSEL_PC_ABSL_CFLAGS "-isystem \${prefix}/${TESSEL_INSTALL_ABSL_INCLUDEDIR}")
  list(TRANSFORM TESSEL_ABSL_LIBRARIES PREPEND "-l:" OUTPUT_VARIABLE _tessel_pc_libs)
  list(JOIN _tessel_pc_libs " " TESSEL_PC_ABSL_LIBS)
  string(APPEND TESSEL_PC_ABSL_LIBS " -pthread")
  set(TESSEL_PC_REQUIRES "")
else()
  set(TESSEL_CONFIG_ABSL_LIBRARIES "")
  set(TESSEL_PC_ABSL_CFLAGS "")
  set(TESSEL_PC_ABSL_LIBS "")
  # Debian's Abseil has one pkg-config file per target: absl::status -> absl_status.pc.
  list(TRANSFORM _tessel_absl_targets REPLACE "^absl::" "absl_" OUTPUT_VARIABLE _tessel_pc_requires)
  list(JOIN _tessel_pc_requires " " TESSEL_PC_REQUIRES)
  set(TESSEL_PC_REQUIRES "Requires: ${TESSEL_PC_REQUIRES}")
endif()

# CMake package files, for the installed tree and for the build tree (from the
# same template: only the installed one brings its own Abseil).
install(EXPORT tesselTargets NAMESPACE tessel:: DESTINATION ${TESSEL_INSTALL_CMAKEDIR} COMPONENT devel)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tesselConfig.cmake.in
  ${_tessel_install_files}/tesselConfig.cmake
  INSTALL_DESTINATION ${TESSEL_INSTALL_CMAKEDIR}
  PATH_VARS TESSEL_INSTALL_LIBDIR TESSEL_INSTALL_ABSL_INCLUDEDIR)
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesselConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${_tessel_install_files}/tesselConfig.cmake ${PROJECT_BINARY_DIR}/tesselConfigVersion.cmake
  DESTINATION ${TESSEL_INSTALL_CMAKEDIR} COMPONENT devel)

set(TESSEL_CONFIG_ABSL_LIBRARIES "")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tesselConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tesselConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
  INSTALL_PREFIX ${PROJECT_BINARY_DIR}
  PATH_VARS TESSEL_INSTALL_LIBDIR TESSEL_INSTALL_ABSL_INCLUDEDIR)
export(EXPORT tesselTargets NAMESPACE tessel:: FILE ${PROJECT_BINARY_DIR}/tesselTargets.cmake)

# pkg-config, for builds without CMake: `pkg-config --cflags --libs P/lib/pkgconfig/tessel.pc`.
configure_file(${CMAKE_CURRENT_LIST_DIR}/tessel.pc.in ${_tessel_install_files}/tessel.pc @ONLY)
install(FILES ${_tessel_install_files}/tessel.pc DESTINATION ${TESSEL_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)

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
# and reads what they need from the installed files themselves. To those it
# adds every Abseil library tessel::tessel's users link (tessel::absl): the
# inline code of Abseil's headers may call into libraries libtessel.so itself
# never loads (absl::optional's throw helper, the hash table sampler).
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
    "set(_tessel_absl_libraries \"${TESSEL_ABSL_LIBRARIES}\")\n"
    "set(_tessel_absl_files \"${TESSEL_ABSL_LIBRARY_FILES}\")\n"
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
  LIBRARIES "${_root}/${_tessel_lib}" ${_tessel_absl_files}
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
list(APPEND _deps ${_tessel_absl_files})
if(_missing)
  message(FATAL_ERROR "tessel: cannot find ${_missing} to bundle (install libabsl-dev and libbenchmark-dev)")
endif()
if(_deps AND NOT _tessel_patchelf)
  message(FATAL_ERROR "tessel: bundling shared libraries needs patchelf: apt-get install patchelf")
endif()
set(_count 0)
set(_names "")
foreach(_dep IN LISTS _deps)
  string(FIND "${_dep}" "${_root}/" _at)
  get_filename_component(_name "${_dep}" NAME)
  list(FIND _names "${_name}" _seen)  # install scripts run without CMP0057: no IN_LIST
  if(_at EQUAL 0 OR _seen GREATER -1)  # already in this tree (a repeated install), or found twice (/lib, /usr/lib)
    continue()
  endif()
  list(APPEND _names "${_name}")
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
foreach(_soname IN LISTS _tessel_absl_libraries)
  if(NOT EXISTS "${_root}/${_tessel_libdir}/${_soname}")
    message(FATAL_ERROR "tessel: ${_soname}, which tesselConfig.cmake and tessel.pc link, was not bundled into ${_tessel_libdir}/")
  endif()
endforeach()
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
