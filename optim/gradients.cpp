// zero_grad in both of torch.optim's forms, and the global gradient norm and clipping of torch.nn.utils.
#include "optim/gradients.h"

#include "base/foreach.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/_foreach_zero.h>

namespace ddp {

void zero_grad(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

void zero_grad_in_place(torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> grads;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      auto& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (grad.grad_fn())
        grad.detach_();
      else
        grad.requires_grad_(false);
      grads.push_back(grad);
    }
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    const std::vector<torch::Tensor> group = pick(grads, indices);
    if (uses_foreach_kernels(group.front().device()) && !group.front().is_sparse()) {
      at::_foreach_zero_(group);
    } else {
      for (auto g : group) g.zero_();
    }
  }
}

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

torch::Tensor total_norm(const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  if (grads.empty()) return torch::zeros({}, torch::kFloat32);
  std::vector<torch::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    const std::vector<torch::Tensor> group = pick(grads, indices);
    if (uses_foreach_kernels(group.front().device())) {
      for (auto& n : at::_foreach_norm(group, 2)) norms.push_back(std::move(n));
    } else {
      for (const auto& g : group) norms.push_back(torch::linalg_vector_norm(g, 2));
    }
  }
  const c10::Device first = grads.front().device();
  for (auto& n : norms)
    if (n.device() != first) n = n.to(first);
  return torch::linalg_vector_norm(torch::stack(norms), 2);
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  torch::Tensor norm = total_norm(grads);
  if (grads.empty()) return norm;
  // torch.nn.utils._clip_grads_with_norm_: the coefficient clamped to 1 (multiplying by it is then free of a branch).
  const torch::Tensor coefficient = torch::clamp(max_norm / (norm + 1e-6), std::nullopt, 1.0);
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    std::vector<torch::Tensor> group = pick(grads, indices);
    const torch::Tensor on_device = coefficient.to(group.front().device());
    if (uses_foreach_kernels(group.front().device())) {
      at::_foreach_mul_(group, on_device);
    } else {
      for (auto& g : group) g.mul_(on_device);
    }
  }
  return norm;
}

torch::Tensor NonFiniteCheck::operator()(const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  const c10::Device first = grads.empty() ? c10::Device(c10::kCPU) : grads.front().device();
  if (!found_.defined() || found_.device() != first) {
    found_ = torch::zeros({1}, torch::dtype(torch::kFloat32).device(first));
    one_ = torch::ones({1}, torch::dtype(torch::kFloat32).device(first));
  } else {
    found_.zero_();
  }
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    const std::vector<torch::Tensor> group = pick(grads, indices);
    const c10::Device device = group.front().device();
    if (device == first) {
      at::_amp_foreach_non_finite_check_and_unscale_(group, found_, one_);
    } else {
      torch::Tensor there = torch::zeros({1}, torch::dtype(torch::kFloat32).device(device));
      at::_amp_foreach_non_finite_check_and_unscale_(group, there, one_.to(device));
      found_.add_(there.to(first));
    }
  }
  return found_;
}

}  // namespace ddp
