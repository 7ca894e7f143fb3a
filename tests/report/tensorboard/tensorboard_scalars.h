// Test helper: every scalar of a TensorBoard log directory as PyPI tensorboard's EventAccumulator loads it.
#pragma once

#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace ddp::test {

struct TensorBoardScalar {
  std::string tag;
  int64_t step = 0;
  double value = 0;
};

// The scalars of `logdir` in TensorBoard's order (tests/python/tb_scalars.py); a failing reader fails the test.
inline std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::string& logdir) {
  const CommandResult read = run_command(python() + " " + source_dir() + "/tests/python/tb_scalars.py " + logdir);
  EXPECT_EQ(read.exit_code, 0) << read.output;
  std::vector<TensorBoardScalar> scalars;
  std::istringstream in(read.output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    TensorBoardScalar s;
    if (f >> s.tag >> s.step >> s.value) scalars.push_back(s);
  }
  return scalars;
}

}  // namespace ddp::test
