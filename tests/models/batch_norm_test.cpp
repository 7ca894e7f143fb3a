// SyncBatchNorm (models/batch_norm.h): two ranks of one process, each with half the batch, give what one BatchNorm2d
// gives on the whole batch: outputs, input and parameter gradients, running statistics (the CPU's formulas). On a GPU
// two ranks cannot share one process: autograd runs every CUDA backward on the device's one worker thread, where the
// first rank's all-reduce would wait for a backward queued behind it; ATen's CUDA kernels are compared with PyTorch's
// own SyncBatchNorm across processes instead (CudaSyncBatchNorm in tests/distributed/ddp_test.cpp).
#include "distributed/process_group.h"
#include "models/batch_norm.h"
#include "tests/support/rounding.h"
#include "train/batch_norm_sync.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <iostream>
#include <thread>
#include <vector>

namespace ddp::test {
namespace {

struct BatchNormRun {
  torch::Tensor output, input_grad, weight_grad, bias_grad, running_mean, running_var;
};

const std::vector<double> kWeight = {0.5, 1.5, -1.0, 2.0}, kBias = {0.1, -0.2, 0.3, 0.0};
constexpr double kMomentum = 0.2, kEps = 1e-5;

// Two training forwards and backwards of BatchNorm2d(4) with a non-trivial affine transform, on `inputs` with loss
// sum(output * weights); with collectives set, the layer runs sync_batch_norm.
BatchNormRun run_batch_norm(const torch::Tensor& input, const torch::Tensor& loss_weights,
                            const c10::intrusive_ptr<BatchNormCollectives>& collectives, torch::Device device) {
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(4).momentum(kMomentum).eps(kEps));
  bn->to(device);
  {
    torch::NoGradGuard no_grad;
    bn->weight.copy_(torch::tensor(kWeight));
    bn->bias.copy_(torch::tensor(kBias));
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

// First-order rounding scales of every result (support/rounding.h: each side lies within gamma_n times these of the
// exact value), from the batch in float64. Per channel BatchNorm sums n = N*H*W terms: the mean within gamma_n of
// mean |x|; the biased variance, a sum of squared deviations, within gamma_n of itself (its derivative in the mean is
// zero, so the mean's error enters at second order; Chan, Golub and LeVeque 1983 for the streaming and merged forms
// of the two sides), so invstd within gamma_n / 2 relatively; xhat = (x - mean) * invstd then within
// invstd * mean |x| + |xhat| times gamma_n. The outputs, gradients and running statistics carry those errors through
// a few more operations each, which n + 8 terms absorb. The two sides sum in other orders (one pass over the whole
// batch against per-rank moments merged by batch_norm_gather_stats_with_counts and all-reduced sums), so they agree
// within twice these scales, on any machine; a wrong count or a rank's local statistics is off by percents.
BatchNormRun rounding_scales(const torch::Tensor& input, const torch::Tensor& loss_weights) {
  const torch::Tensor x = input.to(torch::kDouble), g = loss_weights.to(torch::kDouble);
  const std::vector<int64_t> dims = {0, 2, 3};
  const double n = static_cast<double>(x.numel() / x.size(1));
  auto channel = [](const std::vector<double>& v) { return torch::tensor(v, torch::kDouble).view({1, -1, 1, 1}); };
  const torch::Tensor mean = x.mean(dims, true), var = x.var(dims, false, true);
  const torch::Tensor invstd = (var + kEps).rsqrt(), xhat = (x - mean) * invstd;
  const torch::Tensor w = channel(kWeight), b = channel(kBias);
  const torch::Tensor mean_error = invstd * x.abs().mean(dims, true);  // xhat's error from the mean's, in gamma_n
  const torch::Tensor xhat_scale = xhat.abs() + mean_error;
  const torch::Tensor sum_g = g.abs().sum(dims, true), sum_g_xhat = (g * xhat).sum(dims, true).abs();
  BatchNormRun s;
  s.output = w.abs() * xhat_scale + b.abs();
  s.bias_grad = sum_g.flatten();
  s.weight_grad = (g.abs() * xhat_scale).sum(dims).flatten();
  // grad_input = w invstd (g - sum(g)/n - xhat sum(g xhat)/n) (native_batch_norm_backward)
  s.input_grad =
      w.abs() * invstd *
      (g.abs() + sum_g / n + xhat.abs() * (g.abs() * xhat_scale).sum(dims, true) / n + xhat_scale * sum_g_xhat / n);
  // Two momentum updates (from 0 and 1) by the batch's mean and unbiased variance: the statistic's scale plus the
  // updates' own.
  s.running_mean = x.abs().mean(dims) + mean.flatten().abs();
  s.running_var = 2 * var.flatten() * n / (n - 1) + 1;
  return s;
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& scale, int64_t n,
                  const std::string& what) {
  const double share = rounding_share(a.cpu(), b.cpu(), scale, n + 8);
  const double diff = (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
  EXPECT_LE(share, 1.0) << what << ": max |difference| " << diff;
  std::cout << "[ measured ] " << what << ": max |difference| " << diff << ", " << share << " of the bound\n";
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

  const BatchNormRun scales = rounding_scales(input, loss_weights);
  const int64_t n = input.numel() / input.size(1);  // terms of each channel's sums
  for (int r : {0, 1}) {
    const int64_t begin = r == 0 ? 0 : 6, end = r == 0 ? 6 : 16;
    const std::string name = "rank " + std::to_string(r);
    expect_close(ranks[r].output, whole.output.slice(0, begin, end), scales.output.slice(0, begin, end), n,
                 name + " output");
    expect_close(ranks[r].input_grad, whole.input_grad.slice(0, begin, end), scales.input_grad.slice(0, begin, end), n,
                 name + " input gradient");
    expect_close(ranks[r].running_mean, whole.running_mean, scales.running_mean, n, name + " running_mean");
    expect_close(ranks[r].running_var, whole.running_var, scales.running_var, n, name + " running_var");
  }
  // Each rank's weight and bias gradients are its own share (DDP sums them, then averages).
  expect_close(ranks[0].weight_grad + ranks[1].weight_grad, whole.weight_grad, scales.weight_grad, n,
               "weight gradient");
  expect_close(ranks[0].bias_grad + ranks[1].bias_grad, whole.bias_grad, scales.bias_grad, n, "bias gradient");
  // And the statistics are global: rank 0 alone would normalise differently.
  const BatchNormRun alone = run_batch_norm(input.slice(0, 0, 6), loss_weights.slice(0, 0, 6), {}, device);
  EXPECT_GT((alone.output - ranks[0].output).abs().max().item<double>(), 1e-2);
  EXPECT_GT(rounding_share(alone.output, ranks[0].output, scales.output.slice(0, 0, 6), n + 8), 100);
}

}  // namespace
}  // namespace ddp::test
