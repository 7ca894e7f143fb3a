# Script (cmake -P) run by the fuzz_build test: configures tests/fuzz with clang into BUILD and builds it.
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${BUILD}" -G Ninja
                        "-DCMAKE_CXX_COMPILER=${CLANGXX}" "-DDDP_TORCH_INCLUDE_DIRS=${TORCH_INCLUDE_DIRS}"
                        "-DDDP_TORCH_LIBRARY_DIR=${TORCH_LIBRARY_DIR}" "-DDDP_TORCH_CXX_FLAGS=${TORCH_CXX_FLAGS}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the fuzz targets failed")
endif()

# Builds BUILD; rc and the build's output (stdout and stderr) in the caller's `rc` and `out`.
function(build_fuzzers)
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${BUILD}" RESULT_VARIABLE code OUTPUT_VARIABLE text
                  ERROR_VARIABLE text)
  set(rc "${code}" PARENT_SCOPE)
  set(out "${text}" PARENT_SCOPE)
endfunction()

build_fuzzers()
# clang refuses a precompiled header once any header in it has another mtime than the one it recorded, while Ninja
# rebuilds the header only when an input is newer than it: a package upgrade that installs a header with an older
# mtime (dpkg keeps the package's) leaves a header Ninja thinks current and clang will not read. Built again from
# clean, once.
if(NOT rc EQUAL 0 AND out MATCHES "has been modified since the precompiled header")
  message("${out}")
  message("a header changed under the fuzz targets' precompiled header: building them again from clean")
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${BUILD}" --target clean)
  build_fuzzers()
endif()
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz targets failed")
endif()
