// Test helpers for state-dict interop: running tests/python/state_dict_oracle.py and comparing its tensor dumps.
#pragma once

#include "checkpoint/state_dict.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <string>

namespace ddp::test {

// "" when python() imports torch and torchvision, else why not (for GTEST_SKIP).
std::string python_torch_missing();

#define SKIP_WITHOUT_PYTHON_TORCH()                                         \
  do {                                                                      \
    const std::string why_ = ::ddp::test::python_torch_missing();           \
    if (!why_.empty()) GTEST_SKIP() << "needs PyTorch in python: " << why_; \
  } while (0)

// Runs the oracle with the given (already quoted) arguments; fails the test with its output on a non-zero exit.
CommandResult run_oracle(const std::string& args);

// The tensor stored under `key` in `state`; throws naming the key when there is none.
const at::Tensor& entry(const NamedTensors& state, const std::string& key);

// Reads PREFIX.txt / PREFIX.bin written by the oracle's dump().
NamedTensors read_dump(const std::string& prefix);

// "" when both hold the same keys in the same order with equal dtypes, shapes and bytes; else the first difference.
std::string bitwise_difference(const NamedTensors& expected, const NamedTensors& actual);

// Largest |expected - actual| over all real-valued entries (keys and shapes must match, else throws).
double max_abs_difference(const NamedTensors& expected, const NamedTensors& actual);

}  // namespace ddp::test
