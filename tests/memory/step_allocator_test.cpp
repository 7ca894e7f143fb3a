// Tests: StepAllocator plans steady-state steps without changing what is trained, and never hands out bytes in use.
#include "memory/step_allocator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <thread>

namespace ddp {
namespace {

struct SmallCnn : torch::nn::Module {
  SmallCnn() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(32 * 14 * 14, 10));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc{nullptr};
};

struct Hooks {
  // Inside each step, with conv1's output (64 x 16 x 28 x 28 floats: 3.2 MB, an allocation the plan places).
  std::function<void(int, const torch::Tensor&)> in_step;
  std::function<void(int)> after_step;  // outside any step
};

// SGD with momentum on fixed random batches; with `allocator`, every step is bracketed by begin_step/end_step.
std::vector<torch::Tensor> train(StepAllocator* allocator, int steps, const std::function<int64_t(int)>& batch_of,
                                 const Hooks& hooks = {}) {
  torch::manual_seed(1);
  auto net = std::make_shared<SmallCnn>();
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 1; step <= steps; ++step) {
    torch::manual_seed(100 + step);
    const int64_t b = batch_of(step);
    auto x = torch::randn({b, 1, 28, 28});
    auto y = torch::randint(0, 10, {b});
    if (allocator) allocator->begin_step();
    {  // the step's tensors are freed inside it, as in Trainer::train_step
      sgd.zero_grad();
      auto a1 = net->conv1->forward(x);
      if (hooks.in_step) hooks.in_step(step, a1);
      auto h = torch::max_pool2d(torch::relu(net->conv2->forward(torch::relu(a1))), 2);
      torch::cross_entropy_loss(net->fc->forward(h.flatten(1)), y).backward();
      sgd.step();
    }
    if (allocator) allocator->end_step();
    if (hooks.after_step) hooks.after_step(step);
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

// The same training on a thread the step allocator does not plan for: LibTorch's own CPU allocation.
std::vector<torch::Tensor> train_unplanned(int steps, const std::function<int64_t(int)>& batch_of) {
  std::vector<torch::Tensor> out;
  std::thread([&] { out = train(nullptr, steps, batch_of); }).join();
  return out;
}

void expect_bit_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

int64_t batch64(int) { return 64; }

TEST(StepAllocator, PlannedStepsTrainBitForBitAsWithoutAPlan) {
  const auto expected = train_unplanned(10, batch64);
  StepAllocator& a = StepAllocator::start_run();
  const auto actual = train(&a, 10, batch64);
  expect_bit_identical(actual, expected);
  const auto s = a.stats();
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.planned_steps, 10 - StepAllocator::kRecordedStep);
  EXPECT_EQ(s.diverged_steps, 0);
  // Each step's activations and gradients come from the plan; the block is far smaller than their sum.
  EXPECT_GE(s.planned_allocations, 7 * 6);
  EXPECT_GT(s.plan_bytes, 2 * 64 * 16 * 28 * 28 * 4);
  EXPECT_LT(s.plan_bytes, 20 * 64 * 16 * 28 * 28 * 4);
}

TEST(StepAllocator, ASmallerBatchDivergesAndTheNextStepIsPlannedAgain) {
  auto batch_of = [](int step) -> int64_t { return step == 6 ? 32 : 64; };
  const auto expected = train_unplanned(12, batch_of);
  StepAllocator& a = StepAllocator::start_run();
  const auto actual = train(&a, 12, batch_of);
  expect_bit_identical(actual, expected);
  const auto s = a.stats();
  EXPECT_EQ(s.diverged_steps, 1);     // step 6; step 7 records a new plan
  EXPECT_EQ(s.planned_steps, 2 + 5);  // steps 4-5 and 8-12
}

// Steps that never repeat (the batch size alternates): each step diverges and the next is recorded again, up to
// kMaxPlans plans; then the plan is dropped and steps go back to LibTorch's allocation instead of one mapping per
// large allocation.
TEST(StepAllocator, StepsThatNeverRepeatStopBeingPlannedAfterEightPlans) {
  auto batch_of = [](int step) -> int64_t { return step % 2 == 0 ? 8 : 16; };
  const int steps = 3 + 2 * static_cast<int>(StepAllocator::kMaxPlans) + 6;
  const auto expected = train_unplanned(steps, batch_of);
  StepAllocator& a = StepAllocator::start_run();
  int64_t mapped_when_dropped = -1;
  Hooks hooks;
  hooks.after_step = [&](int step) {
    if (step == 3 + 2 * static_cast<int>(StepAllocator::kMaxPlans)) mapped_when_dropped = a.stats().mapped_allocations;
  };
  const auto actual = train(&a, steps, batch_of, hooks);
  expect_bit_identical(actual, expected);
  const auto s = a.stats();
  EXPECT_EQ(s.plans, StepAllocator::kMaxPlans);
  EXPECT_EQ(s.planned_steps, 0);
  EXPECT_GT(mapped_when_dropped, 0);
  EXPECT_EQ(s.mapped_allocations, mapped_when_dropped) << "the last 6 steps mapped large allocations one by one";
}

// conv1's output of step 5 is kept until after step 7 and then freed on another thread: steps 6 and 7 must not hand
// its bytes (or any planned bytes overlapping them) to anything else.
TEST(StepAllocator, BytesStillInUseAreNotHandedOutAgain) {
  const auto expected = train_unplanned(10, batch64);
  torch::Tensor kept, copy;
  Hooks hooks;
  hooks.in_step = [&](int step, const torch::Tensor& a1) {
    if (step == 5) kept = a1;
  };
  hooks.after_step = [&](int step) {
    if (step == 5) copy = kept.clone();  // outside any step: LibTorch's own allocation
    if (step == 7) {
      EXPECT_TRUE(torch::equal(kept, copy));
      std::thread([t = std::move(kept)]() mutable { t.reset(); }).join();
    }
  };
  StepAllocator& a = StepAllocator::start_run();
  const auto actual = train(&a, 10, batch64, hooks);
  EXPECT_FALSE(kept.defined());
  expect_bit_identical(actual, expected);
  const auto s = a.stats();
  EXPECT_EQ(s.diverged_steps, 2);  // steps 6 and 7 fell back for the bytes in use
  EXPECT_EQ(s.planned_steps, 10 - StepAllocator::kRecordedStep - 2);
}

}  // namespace
}  // namespace ddp
