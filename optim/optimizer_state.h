// Optimizer state (momentum buffers, moments, step counts: each optimizer's own) in torch.optim's state_dict() form,
// and the flat layout of checkpoint format 1.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

namespace ddp {

// What the torch.optim optimizer's state_dict() gives for the same hyperparameters and state:
// {"state": {param index: {its per-parameter entries, e.g. "momentum_buffer": T or "step": float32 0-dim T,
//  "exp_avg": T, "exp_avg_sq": T}}, "param_groups": [{"lr", ... every hyperparameter key torch 2.11 writes ...,
//  "params": [0, 1, ...]}]}. Tensors are cloned.
c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt);

// Loads the torch.optim form (written by optimizer_state_dict or by Python's optimizer.state_dict()). The state of
// param_groups' i-th listed parameter goes to the optimizer's i-th parameter, as torch's load_state_dict does.
// Hyperparameters stay the optimizer's own; returns the ones param_groups disagrees on, lr excepted
// ("momentum 0.5 (config 0.9)"). Structural problems throw naming the entry ("optimizer.state[3].exp_avg ...").
std::vector<std::string> load_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);

// "" when `state`'s param_groups list as many groups of as many parameters each as `opt` has (what torch.optim's
// load_state_dict requires), else both layouts: "optimizer.param_groups list 1 param group of 10 parameters, the
// optimizer has 2 param groups of 6 and 4 parameters". Throws as load_optimizer_state_dict for a misshapen
// param_groups.
std::string param_group_layout_difference(const torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);
// How many parameters each of `state`'s param_groups lists; throws as load_optimizer_state_dict for a misshapen one.
std::vector<size_t> param_group_sizes(const c10::impl::GenericDict& state);

// The optimizer.name of every optimizer whose row says it may have written the torch.optim form's param_groups (Adam
// and AdamW both, for a torch from before decoupled_weight_decay); none if no row does.
std::vector<std::string> optimizers_from_param_groups(const c10::impl::GenericDict& state);

// Checkpoint format 1: keys "<parameter index>.<field>" ("3.momentum_buffer", "3.exp_avg", "3.step" as an int), each
// parameter's fields read as its torch.optim entry.
void load_flat_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);

}  // namespace ddp
