// SyncBatchNorm (models/batch_norm.h): two ranks of one process, each with half the batch, give what one BatchNorm2d
// gives on the whole batch: outputs, input and parameter gradients, running statistics (the CPU's formulas). On a GPU
// two ranks cannot share one process: autograd runs every CUDA backward on the device's one worker thread, where the
// first rank's all-reduce would wait for a backward queued behind it; ATen's CUDA kernels are compared with PyTorch's
// own SyncBatchNorm across processes instead (CudaSyncBatchNorm in tests/distributed/ddp_test.cpp).
#include "distributed/process_group.h"
#include "models/batch_norm.h"
#include "train/batch_norm_sync.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <thread>

namespace ddp::test {
namespace {

struct BatchNormRun {
  torch::Tensor output, input_grad, weight_grad, bias_grad, running_mean, running_var;
};

// Two training forwards and backwards of BatchNorm2d(4) with a non-trivial affine transform, on `inputs` with loss
// sum(output * weights); with collectives set, the layer runs sync_batch_norm.
BatchNormRun run_batch_norm(const torch::Tensor& input, const torch::Tensor& loss_weights,
                            const c10::intrusive_ptr<BatchNormCollectives>& collectives, torch::Device device) {
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(4).momentum(0.2));
  bn->to(device);
  {
    torch::NoGradGuard no_grad;
    bn->weight.copy_(torch::tensor({0.5, 1.5, -1.0, 2.0}));
    bn->bias.copy_(torch::tensor({0.1, -0.2, 0.3, 0.0}));
  }
  BatchNormLayers layers;
  if (collectives) layers.synchronize(collectives);
  BatchNormRun out;
  for (int step = 0; step < 2; ++step) {
    torch::Tensor x = input.to(device).clone().requires_grad_(true);
    bn->zero_grad();
    out.output = layers.forward(*bn, x);
    (out.output * loss_weights.to(device)).sum().backward();
    out.input_grad = x.grad();
  }
  out.weight_grad = bn->weight.grad();
  out.bias_grad = bn->bias.grad();
  out.running_mean = bn->running_mean;
  out.running_var = bn->running_var;
  return out;
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  const double diff = (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5) << what;
}

TEST(SyncBatchNorm, TwoRanksOfHalfTheBatchEqualOneBatchNormOnTheWhole) {
  const torch::Device device(torch::kCPU);
  torch::manual_seed(5);
  // Rank 0 gets 6 samples, rank 1 gets 10 (SyncBatchNorm weighs each rank's statistics by its count).
  const torch::Tensor input = torch::randn({16, 4, 3, 5}) * 3 + 1;
  const torch::Tensor loss_weights = torch::randn({16, 4, 3, 5});
  const BatchNormRun whole = run_batch_norm(input, loss_weights, {}, device);

  auto store = c10::make_intrusive<c10d::HashStore>();
  BatchNormRun ranks[2];
  auto rank = [&](int r) {
    auto gloo = make_gloo_backend(store, r, 2, std::chrono::seconds(30), {"lo"});
    DistContext ctx;
    ctx.rank = r;
    ctx.world_size = 2;
    ctx.device = device;  // the collectives' tensors live where the layer runs
    ctx.group =
        make_process_group(store, r, 2, {{c10::DeviceType::CPU, "gloo", gloo}, {c10::DeviceType::CUDA, "gloo", gloo}});
    const int64_t begin = r == 0 ? 0 : 6, end = r == 0 ? 6 : 16;
    ranks[r] = run_batch_norm(input.slice(0, begin, end), loss_weights.slice(0, begin, end),
                              batch_norm_collectives(ctx), device);
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();

  for (int r : {0, 1}) {
    const int64_t begin = r == 0 ? 0 : 6, end = r == 0 ? 6 : 16;
    const std::string name = "rank " + std::to_string(r);
    expect_close(ranks[r].output, whole.output.slice(0, begin, end), name + " output");
    expect_close(ranks[r].input_grad, whole.input_grad.slice(0, begin, end), name + " input gradient");
    expect_close(ranks[r].running_mean, whole.running_mean, name + " running_mean");
    expect_close(ranks[r].running_var, whole.running_var, name + " running_var");
  }
  // Each rank's weight and bias gradients are its own share (DDP sums them, then averages).
  expect_close(ranks[0].weight_grad + ranks[1].weight_grad, whole.weight_grad, "weight gradient");
  expect_close(ranks[0].bias_grad + ranks[1].bias_grad, whole.bias_grad, "bias gradient");
  // And the statistics are global: rank 0 alone would normalise differently.
  const BatchNormRun alone = run_batch_norm(input.slice(0, 0, 6), loss_weights.slice(0, 0, 6), {}, device);
  EXPECT_GT((alone.output - ranks[0].output).abs().max().item<double>(), 1e-2);
}

}  // namespace
}  // namespace ddp::test
