// What a ddptests run of several tests in one process adds: a line saying that every test it ran skipped, or that
// its filter selected none.
#include <gtest/gtest.h>

#include <cstdio>

namespace ddp::test {
namespace {

// CTest runs a suite's tests as one process (tests/support/test_groups.cmake) and reads the first line as "skipped"
// (a suite of GPU-only tests on a machine without one is not reported as passed) and the second as a failure (a
// listing the groups misread runs nothing rather than passing).
class RunSummaryLine : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const ::testing::UnitTest& run) override {
    if (run.test_to_run_count() == 0) {
      std::printf("ddptests: no test selected\n");
    } else if (run.skipped_test_count() == run.test_to_run_count()) {
      std::printf("ddptests: every test of this run skipped\n");
    }
    std::fflush(stdout);
  }
};

const bool kRunSummaryLine = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RunSummaryLine);
  return true;
}();

}  // namespace
}  // namespace ddp::test
