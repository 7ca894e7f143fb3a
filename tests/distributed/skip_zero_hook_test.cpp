// dist.skip_zero_gradients: the same parameters as all-reducing whole buckets after every step (fp32, fp16 and bf16
// compression), fewer elements sent, and the positions learnt and sent when one rank has non-zeros where the
// others had none.
#include "distributed/ddp.h"
#include "optim/gradients.h"
#include "tests/support/in_process_rank.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <thread>

namespace ddp::test {
namespace {

constexpr int kSteps = 8;
constexpr int kFeatures = 64;
constexpr int kUsedFeatures = 24;  // the first layer's weight columns past these get no gradient

struct TrainedRun {
  std::vector<std::vector<torch::Tensor>> params;  // rank 0's, after each step
  std::vector<torch::Tensor> rank1_final;
  SkipZeroStats stats;
};

// Two ranks of one process (Gloo over a HashStore) train the same MLP on inputs whose features past kUsedFeatures
// are zero, except feature 40 on rank 1 at `stray_step` (-1: never).
TrainedRun train(bool skip_zero, GradCompression compression, int stray_step) {
  std::vector<std::vector<torch::Tensor>> inputs(2);
  std::shared_ptr<torch::nn::SequentialImpl> models[2];
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(5);
    models[r] = std::make_shared<torch::nn::SequentialImpl>(torch::nn::Linear(kFeatures, 32), torch::nn::Tanh(),
                                                            torch::nn::Linear(32, 4));
    torch::manual_seed(100 + r);
    for (int step = 0; step < kSteps; ++step) {
      auto x = torch::zeros({8, kFeatures});
      x.narrow(1, 0, kUsedFeatures).copy_(torch::randn({8, kUsedFeatures}));
      if (r == 1 && step == stray_step) x.select(1, 40).fill_(0.5);
      inputs[static_cast<size_t>(r)].push_back(x);
    }
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  TrainedRun run;
  auto rank = [&](int r) {
    DistContext ctx = in_process_rank(store, r, 2);
    DistConfig cfg;
    cfg.skip_zero_gradients = skip_zero;
    cfg.grad_compression = compression;
    auto& model = models[r];
    DistributedDataParallel ddp(model, ctx, cfg);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < kSteps; ++step) {
      zero_grad_in_place(sgd);
      ddp.pre_forward(true);
      torch::Tensor out = model->forward(inputs[static_cast<size_t>(r)][static_cast<size_t>(step)]);
      ddp.post_forward(true, out);
      out.pow(2).mean().backward();
      sgd.step();
      if (r == 0) {
        run.params.emplace_back();
        for (const auto& p : model->parameters()) run.params.back().push_back(p.detach().clone());
      }
    }
    if (r == 1)
      for (const auto& p : model->parameters()) run.rank1_final.push_back(p.detach().clone());
    if (r == 0 && skip_zero) run.stats = *ddp.skip_zero_stats();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  return run;
}

void expect_same_parameters(const TrainedRun& a, const TrainedRun& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t step = 0; step < a.params.size(); ++step)
    for (size_t i = 0; i < a.params[step].size(); ++i)
      EXPECT_TRUE(torch::equal(a.params[step][i], b.params[step][i])) << "step " << step + 1 << ", parameter " << i;
  for (size_t i = 0; i < a.rank1_final.size(); ++i)
    EXPECT_TRUE(torch::equal(a.rank1_final[i], a.params.back()[i])) << "rank 1 differs from rank 0, parameter " << i;
}

TEST(SkipZeroGradients, SameParametersAsWholeBucketsAndFewerElementsSent) {
  const TrainedRun whole = train(false, GradCompression::None, -1), skipped = train(true, GradCompression::None, -1);
  expect_same_parameters(skipped, whole);
  const SkipZeroStats& s = skipped.stats;
  // Step 1 (one bucket) and step 2 (the rebuilt bucket, its parameters in gradient-ready order) send whole buckets;
  // the rest only the positions step 2 left non-zero and the flag.
  EXPECT_EQ(s.repeats, 0);
  EXPECT_EQ(s.gathered_buckets, kSteps - 2);
  // The first layer's weight columns past kUsedFeatures, 32 x 40 of the 2212 elements, never leave a rank.
  const int64_t total = 32 * kFeatures + 32 + 32 * 4 + 4;
  EXPECT_EQ(s.elements, total * kSteps);
  EXPECT_LE(s.elements_sent, total * 2 + (total - 32 * (kFeatures - kUsedFeatures) + 1) * (kSteps - 2));
  EXPECT_LT(s.elements_sent, s.elements * 6 / 10);
}

TEST(SkipZeroGradients, ARankWithNonZerosElsewhereMakesEveryRankLearnAndSendTheNewPositions) {
  const TrainedRun whole = train(false, GradCompression::None, /*stray_step=*/4),
                   skipped = train(true, GradCompression::None, 4);
  expect_same_parameters(skipped, whole);
  const SkipZeroStats& s = skipped.stats;
  EXPECT_EQ(s.repeats, 1);
  EXPECT_EQ(s.gathered_buckets, kSteps - 2);
  EXPECT_EQ(s.whole_buckets, 2);
  // Column 40 of the first layer's weight (32 elements) is sent once more on the fifth step and with the others from
  // then on; the other unused columns stay out.
  const int64_t total = 32 * kFeatures + 32 + 32 * 4 + 4, live = total - 32 * (kFeatures - kUsedFeatures);
  EXPECT_LE(s.elements_sent, total * 2 + (live + 1) * 3 + 32 + (live + 32 + 1) * 3);
  EXPECT_GT(s.elements_sent, total * 2 + 32 * 4);
}

// With fp16 or bf16 compression the values sent are float16 or bfloat16 and divided, the positions are learnt from
// the float gradients (a gradient that rounds to zero in float16 on one step is not taken for one that is always
// zero). The whole-bucket runs are those of LibTorch's FP16CompressCommHook and ddptrain's Bf16CompressHook.
TEST(SkipZeroGradients, CompressionGivesTheCompressHooksParameters) {
  for (GradCompression compression : {GradCompression::Fp16, GradCompression::Bf16})
    for (int stray_step : {-1, 4}) {
      SCOPED_TRACE(std::string(compression == GradCompression::Fp16 ? "fp16" : "bf16") + ", stray step " +
                   std::to_string(stray_step));
      const TrainedRun whole = train(false, compression, stray_step), skipped = train(true, compression, stray_step);
      expect_same_parameters(skipped, whole);
      EXPECT_EQ(skipped.stats.repeats, stray_step < 0 ? 0 : 1);
      EXPECT_EQ(skipped.stats.gathered_buckets, kSteps - 2);
      EXPECT_LT(skipped.stats.elements_sent, skipped.stats.elements * 7 / 10);
    }
}

}  // namespace
}  // namespace ddp::test
