// sync_batch_norm: torch.nn.SyncBatchNorm's forward and backward (torch/nn/modules/_functions.py) for BatchNorm2d.
#include "models/batch_norm.h"

#include "base/python_number.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/functional/batchnorm.h>

namespace ddp {
namespace {

using torch::Tensor;

// torch.nn.BatchNorm2d.forward (torch/nn/modules/batchnorm.py) for LibTorch's module, as LibTorch's forward but with
// the batch count advanced as Python advances it (num_batches_tracked.add_(1): one operator, where LibTorch's += 1
// runs two).
Tensor batch_norm(torch::nn::BatchNorm2dImpl& bn, const Tensor& input) {
  TORCH_CHECK(input.dim() == 4, "BatchNorm2d: expected 4D input (got ", input.dim(), "D input)");
  const auto& o = bn.options;
  double factor = o.momentum() ? *o.momentum() : 0.0;
  if (bn.is_training() && o.track_running_stats() && bn.num_batches_tracked.defined()) {
    bn.num_batches_tracked.add_(python_number(1));
    if (!o.momentum()) factor = 1.0 / bn.num_batches_tracked.item<double>();
  }
  return torch::nn::functional::detail::batch_norm(input, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                                   bn.is_training() || !o.track_running_stats(), factor, o.eps());
}

// The reduced dimensions of an [N, C, ...] input (all but channels), and a [C] vector shaped to broadcast against it.
std::vector<int64_t> all_but_channels(const Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}
Tensor channel_view(const Tensor& v, const Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = -1;
  return v.view(shape);
}
// The accumulation type ATen's batch-norm kernels compute statistics in: float for float16/bfloat16/float.
Tensor accumulated(const Tensor& x) { return x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat); }

// ATen's SyncBatchNorm kernels exist for CUDA only; on the CPU each is the same formula in tensor operations.
std::tuple<Tensor, Tensor> channel_stats(const Tensor& x, double eps) {
  if (x.is_cuda()) return at::batch_norm_stats(x, eps);
  const Tensor xf = accumulated(x);
  const Tensor mean = xf.mean(all_but_channels(x));
  const Tensor var = (xf - channel_view(mean, x)).square().mean(all_but_channels(x));  // biased, as the kernel's
  return {mean, (var + eps).rsqrt()};
}

// Global mean and 1/std from every rank's (mean, 1/std, count), and the running statistics' update with the unbiased
// global variance: the parallel-variance combination batch_norm_gather_stats_with_counts makes.
std::tuple<Tensor, Tensor> gather_stats(const Tensor& x, const Tensor& mean_all, const Tensor& invstd_all,
                                        const Tensor& running_mean, const Tensor& running_var, double momentum,
                                        double eps, const Tensor& counts) {
  if (x.is_cuda())
    return at::batch_norm_gather_stats_with_counts(x, mean_all, invstd_all, running_mean, running_var, momentum, eps,
                                                   counts);
  const Tensor c = counts.to(mean_all.scalar_type()).view({-1, 1});
  const Tensor n = c.sum();
  const Tensor mean = (mean_all * c).sum(0) / n;
  const Tensor var_each = invstd_all.square().reciprocal() - eps;
  const Tensor var = ((var_each + (mean_all - mean).square()) * c).sum(0) / n;
  torch::NoGradGuard no_grad;
  if (running_mean.defined()) running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()) * momentum);
  if (running_var.defined())
    running_var.mul_(1 - momentum).add_((var * n / (n - 1)).to(running_var.scalar_type()) * momentum);
  return {mean, (var + eps).rsqrt()};
}

Tensor normalize(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& mean, const Tensor& invstd,
                 double eps) {
  if (x.is_cuda()) return at::batch_norm_elemt(x, weight, bias, mean, invstd, eps);
  Tensor y = (accumulated(x) - channel_view(mean, x)) * channel_view(invstd, x);
  if (weight.defined()) y = y * channel_view(weight, x);
  if (bias.defined()) y = y + channel_view(bias, x);
  return y.to(x.scalar_type());
}

// This rank's sums of dy and dy * (x - mean) per channel, and the weight and bias gradients they give.
std::tuple<Tensor, Tensor, Tensor, Tensor> backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                                           const Tensor& invstd, const Tensor& weight, bool input_g,
                                                           bool weight_g, bool bias_g) {
  if (x.is_cuda()) return at::batch_norm_backward_reduce(dy, x, mean, invstd, weight, input_g, weight_g, bias_g);
  const Tensor dyf = accumulated(dy);
  const Tensor sum_dy = dyf.sum(all_but_channels(x));
  const Tensor sum_dy_xmu = (dyf * (accumulated(x) - channel_view(mean, x))).sum(all_but_channels(x));
  Tensor grad_weight, grad_bias;
  if (weight.defined() && weight_g) grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
  if (weight.defined() && bias_g) grad_bias = sum_dy.to(weight.scalar_type());
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

// The input gradient from the sums over every rank, divided by the global count.
Tensor backward_input(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& count) {
  if (x.is_cuda()) return at::batch_norm_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count);
  const Tensor n = count.sum().to(sum_dy.scalar_type());
  const Tensor mean_dy = sum_dy / n;
  const Tensor mean_dy_xmu = sum_dy_xmu / n;
  Tensor scale = invstd;
  if (weight.defined()) scale = scale * weight.to(invstd.scalar_type());
  const Tensor xmu = accumulated(x) - channel_view(mean, x);
  const Tensor dx =
      (accumulated(dy) - channel_view(mean_dy, x) - xmu * channel_view(invstd.square() * mean_dy_xmu, x)) *
      channel_view(scale, x);
  return dx.to(x.scalar_type());
}

// As torch.nn.modules._functions.SyncBatchNorm: all_gather of (mean, 1/std, count) in the forward, all_reduce of
// (sum dy, sum dy * (x - mean)) in the backward.
struct SyncBatchNormFunction : torch::autograd::Function<SyncBatchNormFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor input, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, double eps, double momentum,
                        const c10::intrusive_ptr<BatchNormCollectives>& collectives) {
    if (!input.is_contiguous(torch::MemoryFormat::ChannelsLast)) input = input.contiguous();
    const int64_t channels = input.size(1);
    auto [mean, invstd] = channel_stats(input, eps);
    const Tensor count = torch::full({1}, static_cast<double>(input.numel() / channels), mean.options());
    const Tensor all =
        collectives->all_gather(torch::cat(std::vector<Tensor>{mean, invstd, count}));  // [world, 2C + 1]
    const auto parts = all.split(channels, 1);
    const Tensor counts = parts[2].view(-1);
    auto [global_mean, global_invstd] =
        gather_stats(input, parts[0], parts[1], running_mean, running_var, momentum, eps,
                     running_mean.defined() ? counts.to(running_mean.scalar_type()) : counts);
    ctx->save_for_backward({input, weight, global_mean, global_invstd, counts.to(torch::kInt)});
    ctx->saved_data["collectives"] = c10::IValue::make_capsule(collectives);
    return normalize(input, weight, bias, global_mean, global_invstd, eps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    Tensor dy = grads[0];
    if (!dy.is_contiguous(torch::MemoryFormat::ChannelsLast)) dy = dy.contiguous();
    const auto saved = ctx->get_saved_variables();
    const Tensor &input = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3], &count = saved[4];
    auto [sum_dy, sum_dy_xmu, grad_weight, grad_bias] = backward_reduce(
        dy, input, mean, invstd, weight, ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2));
    Tensor grad_input;
    if (ctx->needs_input_grad(0)) {
      auto collectives =
          c10::static_intrusive_pointer_cast<BatchNormCollectives>(ctx->saved_data["collectives"].toCapsule());
      Tensor combined = torch::cat(std::vector<Tensor>{sum_dy, sum_dy_xmu});
      collectives->all_reduce_sum(combined);
      const auto sums = combined.split(sum_dy.size(0));
      grad_input = backward_input(
          dy, input, mean, invstd,
          weight.defined() && weight.scalar_type() != mean.scalar_type() ? weight.to(mean.scalar_type()) : weight,
          sums[0], sums[1], count);
    }
    return {grad_input, grad_weight, grad_bias, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor sync_batch_norm(torch::nn::BatchNorm2dImpl& bn, const Tensor& input,
                       const c10::intrusive_ptr<BatchNormCollectives>& collectives) {
  // BatchNorm's momentum and num_batches_tracked rules, as SyncBatchNorm.forward applies them.
  double momentum = bn.options.momentum().value_or(0.0);
  const bool track = bn.options.track_running_stats();
  if (track && bn.num_batches_tracked.defined()) {
    bn.num_batches_tracked += 1;
    if (!bn.options.momentum().has_value()) momentum = 1.0 / bn.num_batches_tracked.item<double>();
  }
  return SyncBatchNormFunction::apply(input, bn.weight, bn.bias, track ? bn.running_mean : Tensor(),
                                      track ? bn.running_var : Tensor(), bn.options.eps(), momentum, collectives);
}

int64_t count_batchnorm_layers(const torch::nn::Module& m) {
  int64_t layers = 0;
  for (const auto& child : m.modules(/*include_self=*/false)) layers += child->as<torch::nn::BatchNorm2d>() ? 1 : 0;
  return layers;
}

Tensor BatchNormLayers::forward(torch::nn::BatchNorm2dImpl& bn, const Tensor& input) const {
  if (!collectives_ || !bn.is_training() || collectives_->world_size() < 2) return batch_norm(bn, input);
  return sync_batch_norm(bn, input, collectives_);
}

}  // namespace ddp
