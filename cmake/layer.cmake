# tessel_layer(NAME SOURCES...) makes one layer of libtessel as an object
# library; its objects are linked into libtessel.so.
find_package(Threads REQUIRED)
function(tessel_layer name)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PUBLIC ${TESSEL_SOURCE_INCLUDES})
  target_compile_options(${name} PRIVATE -ffunction-sections -fdata-sections)
  target_link_libraries(${name} PUBLIC absl::status absl::statusor absl::strings
    absl::str_format absl::span absl::hash absl::flat_hash_map absl::synchronization)
endfunction()
