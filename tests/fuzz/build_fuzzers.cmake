# Script (cmake -P) run by the fuzz_build test: configures tests/fuzz with clang into BUILD and builds it.
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${BUILD}" -G Ninja
                        "-DCMAKE_CXX_COMPILER=${CLANGXX}" "-DDDP_TORCH_INCLUDE_DIRS=${TORCH_INCLUDE_DIRS}"
                        "-DDDP_TORCH_LIBRARY_DIR=${TORCH_LIBRARY_DIR}" "-DDDP_TORCH_CXX_FLAGS=${TORCH_CXX_FLAGS}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the fuzz targets failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${BUILD}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz targets failed")
endif()
