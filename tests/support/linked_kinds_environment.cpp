// The test runner hands the rows of every linked model, optimizer and dataset kind down to config/, as ddptrain's main
// does, before any test runs.
#include "train/linked_kinds.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

class LinkedKinds : public ::testing::Environment {
 public:
  void SetUp() override { hand_down_linked_kinds(); }
};

// GoogleTest owns the environment and sets it up before the first test.
[[maybe_unused]] ::testing::Environment* const kLinkedKinds = ::testing::AddGlobalTestEnvironment(new LinkedKinds);

}  // namespace
}  // namespace ddp::test
