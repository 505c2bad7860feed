# What of Abseil a binary package carries so that code can be built against
# it where no Abseil is installed (Ubuntu 24.04 on the GPU machine), or where a
# different build of it is: tessel's headers use absl::Status and
# absl::StatusOr, and libtessel.so's API is compiled against the Abseil it was
# built with. Debian's Abseil 20220623 puts its code in the inline namespace
# absl::debian3 (base/options.h); a consumer compiled against any other
# build's headers would call functions libtessel.so does not export.
#
#   TESSEL_ABSL_INCLUDE_DIR  where the headers below are read from
#   TESSEL_ABSL_HEADERS      the Abseil headers the public headers include,
#                            transitively ("absl/status/status.h", ...)
#   TESSEL_ABSL_LIBRARIES    the sonames of the Abseil shared libraries a user
#                            of tessel::tessel links ("libabsl_status.so.20220623", ...)
#   TESSEL_ABSL_LIBRARY_FILES  the same, as the files to bundle (the soname links)
#
# Both lists are worked out from the files themselves: the headers by
# following #include lines (every branch of an #if, so nothing a different
# compiler or standard selects is missing), the libraries by following the
# link interfaces of the absl:: targets libtessel.so's interface names.

get_target_property(TESSEL_ABSL_INCLUDE_DIR absl::config INTERFACE_INCLUDE_DIRECTORIES)
list(GET TESSEL_ABSL_INCLUDE_DIR 0 TESSEL_ABSL_INCLUDE_DIR)

function(_tessel_absl_includes path out)
  file(STRINGS ${path} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]absl/")
  set(includes "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<](absl/[^\">]+)[\">].*" "\\1" include "${line}")
    list(APPEND includes ${include})
  endforeach()
  set(${out} ${includes} PARENT_SCOPE)
endfunction()

function(tessel_absl_header_closure out)
  set(queue "")
  foreach(header IN LISTS TESSEL_PUBLIC_HEADERS ITEMS include/tessel/tessel.h)
    _tessel_absl_includes(${PROJECT_SOURCE_DIR}/${header} includes)
    list(APPEND queue ${includes})
  endforeach()
  set(seen "")
  while(queue)
    list(POP_FRONT queue header)
    if(header IN_LIST seen)
      continue()
    endif()
    set(path ${TESSEL_ABSL_INCLUDE_DIR}/${header})
    # An include for another platform may name a file Debian's Abseil does
    # not install; no compiler here reaches it either.
    if(NOT EXISTS ${path})
      continue()
    endif()
    list(APPEND seen ${header})
    _tessel_absl_includes(${path} includes)
    list(APPEND queue ${includes})
  endwhile()
  if(NOT seen)
    message(FATAL_ERROR "tessel: found none of the Abseil headers tessel's public headers include in ${TESSEL_ABSL_INCLUDE_DIR}")
  endif()
  list(SORT seen)
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(tessel_absl_link_closure target out_sonames out_files)
  get_target_property(queue ${target} INTERFACE_LINK_LIBRARIES)
  list(FILTER queue INCLUDE REGEX "^absl::")
  set(seen "")
  set(sonames "")
  set(files "")
  while(queue)
    list(POP_FRONT queue item)
    if(item IN_LIST seen OR NOT TARGET ${item})
      continue()
    endif()
    list(APPEND seen ${item})
    get_target_property(type ${item} TYPE)
    if(type STREQUAL "SHARED_LIBRARY")
      get_target_property(configs ${item} IMPORTED_CONFIGURATIONS)
      foreach(suffix "" ${configs})
        if(suffix)
          set(suffix _${suffix})
        endif()
        get_target_property(soname ${item} IMPORTED_SONAME${suffix})
        get_target_property(location ${item} IMPORTED_LOCATION${suffix})
        if(soname AND location)
          break()
        endif()
      endforeach()
      if(NOT soname OR NOT location)
        message(FATAL_ERROR "tessel: ${item} names no soname or no file; cannot bundle it")
      endif()
      get_filename_component(dir ${location} DIRECTORY)
      list(APPEND sonames ${soname})
      list(APPEND files ${dir}/${soname})
    elseif(NOT type STREQUAL "INTERFACE_LIBRARY")
      message(FATAL_ERROR "tessel: ${item} is a ${type}; only shared Abseil libraries can be bundled")
    endif()
    get_target_property(links ${item} INTERFACE_LINK_LIBRARIES)
    if(links)
      list(FILTER links INCLUDE REGEX "^absl::")
      list(APPEND queue ${links})
    endif()
  endwhile()
  list(SORT sonames)
  list(SORT files)
  set(${out_sonames} ${sonames} PARENT_SCOPE)
  set(${out_files} ${files} PARENT_SCOPE)
endfunction()

tessel_absl_header_closure(TESSEL_ABSL_HEADERS)
tessel_absl_link_closure(tessel TESSEL_ABSL_LIBRARIES TESSEL_ABSL_LIBRARY_FILES)
