# CTest tests for the fuzz targets (included by tests/CMakeLists.txt): fuzz_build configures and builds
# tests/fuzz with clang into build/fuzz; per target, fuzz_replay_<t> runs every committed corpus file once and
# fuzz_<t> fuzzes for DDP_FUZZ_SECONDS (10 s; new inputs go to build/fuzz/work/<t>, a finding to
# build/fuzz/crash-<t>-*, which then belongs in tests/fuzz/corpus/<t>/ once fixed) through run_fuzzer.sh, which
# prints a finding's seed, report and input (base64) compactly.
find_program(DDP_CLANGXX NAMES clang++)
if(NOT DDP_CLANGXX)
  message(STATUS "ddptrain: clang++ not found, so no fuzz tests (scripts/setup installs clang)")
  return()
endif()
set(DDP_FUZZ_DIR "${CMAKE_BINARY_DIR}/fuzz")
set(DDP_TORCH_LIBRARY_DIR "${TORCH_INSTALL_PREFIX}/lib")
set(DDP_FUZZ_SECONDS 10 CACHE STRING "How long each fuzz_<target> test fuzzes")
add_test(NAME fuzz_build COMMAND ${CMAKE_COMMAND}
  "-DSOURCE=${CMAKE_SOURCE_DIR}/tests/fuzz" "-DBUILD=${DDP_FUZZ_DIR}" "-DCLANGXX=${DDP_CLANGXX}"
  "-DTORCH_INCLUDE_DIRS=${TORCH_INCLUDE_DIRS}" "-DTORCH_LIBRARY_DIR=${DDP_TORCH_LIBRARY_DIR}"
  "-DTORCH_CXX_FLAGS=${TORCH_CXX_FLAGS}" -P "${CMAKE_SOURCE_DIR}/tests/fuzz/build_fuzzers.cmake")
# A clang build with ASan of what the targets need (about 4 minutes on 2 cores): scripts/test makes it before the suite.
set_tests_properties(fuzz_build PROPERTIES FIXTURES_SETUP ddp_fuzzers TIMEOUT 1200)
foreach(target torch_save safetensors idx config image_decode jpeg_header tar_shard)
  file(MAKE_DIRECTORY "${DDP_FUZZ_DIR}/work/${target}")  # the inputs libFuzzer adds to the corpus
  set(corpus "${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${target}")
  set(limits -rss_limit_mb=2048 -timeout=10 -malloc_limit_mb=2048)
  set(dict "")
  if(EXISTS "${CMAKE_SOURCE_DIR}/tests/fuzz/${target}.dict")
    set(dict "-dict=${CMAKE_SOURCE_DIR}/tests/fuzz/${target}.dict")
  endif()
  add_test(NAME fuzz_replay_${target} COMMAND "${DDP_FUZZ_DIR}/fuzz_${target}" ${limits} -runs=0 "${corpus}")
  add_test(NAME fuzz_${target} COMMAND bash "${CMAKE_SOURCE_DIR}/tests/fuzz/run_fuzzer.sh"
    "${DDP_FUZZ_DIR}/fuzz_${target}" "${DDP_FUZZ_DIR}/crash-${target}-" ${limits} ${dict} -detect_leaks=0
    -max_total_time=${DDP_FUZZ_SECONDS} "${DDP_FUZZ_DIR}/work/${target}" "${corpus}"
    WORKING_DIRECTORY "${DDP_FUZZ_DIR}")
  # Leaks are checked once at exit (per-input checks cost 50x the speed), minus PyTorch's own (lsan.supp).
  set_tests_properties(fuzz_replay_${target} fuzz_${target} PROPERTIES FIXTURES_REQUIRED ddp_fuzzers TIMEOUT 300
    ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/fuzz/lsan.supp:print_suppressions=0")
endforeach()
