// ParamGroup and weight_decay_groups: the optimizer's param groups as torchvision's reference set_weight_decay
// builds them from optimizer.weight_decay, norm_weight_decay and bias_weight_decay.
#pragma once

#include "config/config.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

// One param group (set_weight_decay's "other", "norm" or "bias"): its parameters in torch.optim's order, their names
// as the model's named_parameters() gives them, and the weight decay torch.optim applies to them.
struct ParamGroup {
  std::vector<std::string> param_names;
  std::vector<torch::Tensor> params;
  double weight_decay = 0;
};

// Whether a module of the model's tree is a normalisation layer (set_weight_decay's norm_classes).
using NormLayerTest = std::function<bool(const torch::nn::Module&)>;

// Both norm_weight_decay and bias_weight_decay unset: one group of every parameter of `model` in parameters() order
// with weight_decay. Otherwise torchvision's set_weight_decay(model, weight_decay, norm_weight_decay,
// custom_keys_weight_decay=[("bias", bias_weight_decay)]) as its train.py calls it: the modules walked depth first
// (each one's own parameters, then its children in order), parameters without requires_grad left out; a parameter
// named "bias" goes to "bias" when bias_weight_decay is set, else one of a norm layer's to "norm" when
// norm_weight_decay is set, else to "other"; the groups in the order other, norm, bias, empty ones dropped.
std::vector<ParamGroup> weight_decay_groups(const torch::nn::Module& model, const OptimizerConfig& cfg,
                                            const NormLayerTest& is_norm_layer);

// One group of `params` with optimizer.weight_decay (what weight_decay_groups makes with both keys unset).
std::vector<ParamGroup> single_param_group(const OptimizerConfig& cfg, std::vector<torch::Tensor> params);

// Every group's parameters, in group order (torch.optim's parameter indices).
std::vector<torch::Tensor> grouped_params(const std::vector<ParamGroup>& groups);

// The groups as LibTorch's optimizer takes them: each with a copy of `defaults` carrying its weight decay.
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> torch_param_groups(const std::vector<ParamGroup>& groups,
                                                                  const Options& defaults) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  for (const ParamGroup& g : groups) {
    auto options = std::make_unique<Options>(defaults);
    options->weight_decay(g.weight_decay);
    out.emplace_back(g.params, std::move(options));
  }
  return out;
}

}  // namespace ddp
