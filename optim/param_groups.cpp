// The optimizer's param groups from optimizer.weight_decay, norm_weight_decay and bias_weight_decay, as torchvision's
// reference set_weight_decay builds them (references/classification/utils.py).
#include "optim/param_groups.h"

#include <utility>

namespace ddp {
namespace {

// -1 (the keys' marker) leaves a group unset.
bool is_set(double group_weight_decay) { return group_weight_decay >= 0; }

std::string joined_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// set_weight_decay's _add_params: `module`'s own parameters, then each child's, depth first.
void add_params(const torch::nn::Module& module, const std::string& prefix, const NormLayerTest& is_norm_layer,
                bool split_norm, bool split_bias, ParamGroup& other, ParamGroup& norm, ParamGroup& bias) {
  const bool norm_layer = split_norm && is_norm_layer(module);
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (!item.value().requires_grad()) continue;
    ParamGroup& group = split_bias && item.key() == "bias" ? bias : norm_layer ? norm : other;
    group.param_names.push_back(joined_name(prefix, item.key()));
    group.params.push_back(item.value());
  }
  for (const auto& child : module.named_children())
    add_params(*child.value(), joined_name(prefix, child.key()), is_norm_layer, split_norm, split_bias, other, norm,
               bias);
}

}  // namespace

std::vector<ParamGroup> weight_decay_groups(const torch::nn::Module& model, const OptimizerConfig& cfg,
                                            const NormLayerTest& is_norm_layer) {
  const double weight_decay = cfg.hyper.number("weight_decay");
  const double norm_weight_decay = cfg.hyper.number("norm_weight_decay");
  const double bias_weight_decay = cfg.hyper.number("bias_weight_decay");
  if (!is_set(norm_weight_decay) && !is_set(bias_weight_decay)) {
    std::vector<ParamGroup> one(1);
    one[0].weight_decay = weight_decay;
    for (const auto& item : model.named_parameters()) {
      one[0].param_names.push_back(item.key());
      one[0].params.push_back(item.value());
    }
    return one;
  }
  ParamGroup other{{}, {}, weight_decay}, norm{{}, {}, norm_weight_decay}, bias{{}, {}, bias_weight_decay};
  add_params(model, "", is_norm_layer, is_set(norm_weight_decay), is_set(bias_weight_decay), other, norm, bias);
  std::vector<ParamGroup> groups;
  for (ParamGroup* g : {&other, &norm, &bias})
    if (!g->params.empty()) groups.push_back(std::move(*g));
  return groups;
}

std::vector<ParamGroup> single_param_group(const OptimizerConfig& cfg, std::vector<torch::Tensor> params) {
  std::vector<ParamGroup> one(1);
  one[0].params = std::move(params);
  one[0].weight_decay = cfg.hyper.number("weight_decay");
  return one;
}

std::vector<torch::Tensor> grouped_params(const std::vector<ParamGroup>& groups) {
  std::vector<torch::Tensor> out;
  for (const ParamGroup& g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

}  // namespace ddp
