# One shared library from the layers, with LLVM linked in and hidden.
add_library(tessel SHARED
  $<TARGET_OBJECTS:tessel_base>
  $<TARGET_OBJECTS:tessel_dsl>
  $<TARGET_OBJECTS:tessel_codegen>
  $<TARGET_OBJECTS:tessel_runtime>)
add_library(tessel::tessel ALIAS tessel)
set_target_properties(tessel PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/libtessel.map
  INSTALL_RPATH "$ORIGIN")
target_include_directories(tessel PUBLIC
  "$<BUILD_INTERFACE:${TESSEL_SOURCE_INCLUDES}>"
  "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>"
  "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tessel>")
target_link_libraries(tessel
  PUBLIC absl::status absl::statusor absl::strings absl::str_format absl::span
         absl::hash absl::flat_hash_map absl::synchronization
  PRIVATE ${TESSEL_LLD_ELF} ${TESSEL_LLD_COMMON} ${TESSEL_LLVM_LIBS} ${TESSEL_ZSTD_STATIC} ${CMAKE_DL_LIBS}
          Threads::Threads)
target_link_options(tessel PRIVATE
  -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/libtessel.map
  -Wl,--exclude-libs,ALL
  -Wl,--gc-sections
  -Wl,-z,defs
  # The disk cache keys compiled kernels on this id (runtime/compile_cached.h);
  # not every linker emits one unasked.
  -Wl,--build-id=sha1)
