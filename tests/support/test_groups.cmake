# CTest-time script: one CTest test per GoogleTest suite of the tests a filter selects (tests/CMakeLists.txt,
# ddp_test_groups). Each test is one ddptests process that runs its suite's tests in turn, so LibTorch's start (about
# 0.7 CPU-seconds: its operator registrations and the CUDA libraries it links) is paid once per suite, not once per
# test. Included by CTest (the directory's TEST_INCLUDE_FILES) with these variables set:
#   DDP_GROUPS_EXE         the test binary
#   DDP_GROUPS_FILTER      its --gtest_filter for this class of tests
#   DDP_GROUPS_CLASS       the class's name (what a failed listing is called)
#   DDP_GROUPS_DIR         the tests' working directory
#   DDP_GROUPS_PROPERTIES  the CTest properties of every test of the class (a list of name;value pairs)
execute_process(COMMAND "${DDP_GROUPS_EXE}" --gtest_list_tests "--gtest_filter=${DDP_GROUPS_FILTER}"
                WORKING_DIRECTORY "${DDP_GROUPS_DIR}" OUTPUT_VARIABLE ddp_listing ERROR_VARIABLE ddp_listing_error
                RESULT_VARIABLE ddp_listing_rc TIMEOUT 120)
if(NOT ddp_listing_rc EQUAL 0)
  # The listing itself as the class's one test: it fails, with the binary's own words, where the binary is missing
  # or does not start.
  add_test("${DDP_GROUPS_CLASS}_NOT_LISTED" "${DDP_GROUPS_EXE}" --gtest_list_tests "--gtest_filter=${DDP_GROUPS_FILTER}")
  return()
endif()
# GoogleTest's listing: "Suite." (or "Prefix/Suite.", "Suite/0.") on a line, then "  Test" (or "  Test/instance"),
# each perhaps followed by "  # GetParam() = ..." or "  # TypeParam = ...".
string(REPLACE ";" "," ddp_listing "${ddp_listing}")
string(REPLACE "\n" ";" ddp_lines "${ddp_listing}")
set(ddp_suites "")
set(ddp_suite "")
foreach(ddp_line IN LISTS ddp_lines)
  string(REGEX REPLACE "  #.*$" "" ddp_line "${ddp_line}")
  if(ddp_line MATCHES "^  ([^ ]+)$")
    set(ddp_test "${CMAKE_MATCH_1}")
    if(NOT ddp_test MATCHES "^DISABLED_" AND NOT ddp_suite MATCHES "^DISABLED_")
      list(APPEND "ddp_tests_${ddp_suite}" "${ddp_suite}.${ddp_test}")
    endif()
  elseif(ddp_line MATCHES "^([^ ]+)\\.$")
    set(ddp_suite "${CMAKE_MATCH_1}")
    list(APPEND ddp_suites "${ddp_suite}")
  endif()
endforeach()
foreach(ddp_suite IN LISTS ddp_suites)
  if(NOT ddp_tests_${ddp_suite})
    continue()
  endif()
  list(JOIN "ddp_tests_${ddp_suite}" ":" ddp_filter)
  add_test("${ddp_suite}" "${DDP_GROUPS_EXE}" "--gtest_filter=${ddp_filter}")
  # A suite whose every test skipped is reported as skipped, one whose filter selected no test fails
  # (tests/support/suite_runs.cpp prints the lines); otherwise the suite passes or fails by its tests.
  set_tests_properties("${ddp_suite}" PROPERTIES WORKING_DIRECTORY "${DDP_GROUPS_DIR}"
                       SKIP_REGULAR_EXPRESSION "ddptests: every test of this run skipped"
                       FAIL_REGULAR_EXPRESSION "ddptests: no test selected" ${DDP_GROUPS_PROPERTIES})
endforeach()
