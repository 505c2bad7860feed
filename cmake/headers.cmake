# The public API: these headers, the umbrella include/tessel/tessel.h, and
# every project header they include. The closure is worked out here, at
# configure time, from the #include lines, and each header it reads is a
# configure dependency, so an edit that adds an include is never missed.
# A header whose first line says "// Internal" may not be in it: internal
# headers are never installed.
set(TESSEL_PUBLIC_HEADER_ROOTS
  base/float8.h
  codegen/compile_options.h
  codegen/compiler.h
  runtime/autotune.h
  dsl/builder.h
  dsl/ops.h
  dsl/random.h
  runtime/device.h
  runtime/plans/group.h
  runtime/plans/plan.h
  runtime/plans/schedule.h
  runtime/tensor_map.h)

function(tessel_public_header_closure out)
  set(queue ${TESSEL_PUBLIC_HEADER_ROOTS} include/tessel/tessel.h)
  set(seen "")
  while(queue)
    list(POP_FRONT queue header)
    if(header IN_LIST seen)
      continue()
    endif()
    set(path ${PROJECT_SOURCE_DIR}/${header})
    if(NOT EXISTS ${path})
      message(FATAL_ERROR "tessel: public header ${header} does not exist")
    endif()
    set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
    file(STRINGS ${path} first LIMIT_COUNT 1)
    if(first MATCHES "^// Internal")
      message(FATAL_ERROR "tessel: ${header} is marked internal but a public header includes it")
    endif()
    list(APPEND seen ${header})
    file(STRINGS ${path} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" include "${line}")
      if(EXISTS ${PROJECT_SOURCE_DIR}/${include} AND NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${include})
        list(APPEND queue ${include})
      endif()
    endforeach()
  endwhile()
  list(REMOVE_ITEM seen include/tessel/tessel.h)
  list(SORT seen)
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

tessel_public_header_closure(TESSEL_PUBLIC_HEADERS)
