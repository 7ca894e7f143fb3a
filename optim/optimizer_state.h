// Optimizer state (momentum buffers, Adam moments and step counts) in torch.optim's state_dict() form, and the
// flat layout of checkpoint format 1.
#pragma once

#include "config/choices.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

namespace ddp {

// What torch.optim.SGD / AdamW / Adam(...).state_dict() gives for the same hyperparameters and state:
// {"state": {param index: {"momentum_buffer": T} | {"step": float32 0-dim T, "exp_avg": T, "exp_avg_sq": T}},
//  "param_groups": [{"lr", ... every hyperparameter key torch 2.11 writes ..., "params": [0, 1, ...]}]}.
// Tensors are cloned.
c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt);

// Loads the torch.optim form (written by optimizer_state_dict or by Python's optimizer.state_dict()). The state of
// param_groups' i-th listed parameter goes to the optimizer's i-th parameter, as torch's load_state_dict does.
// Hyperparameters stay the optimizer's own; returns the ones param_groups disagrees on, lr excepted
// ("momentum 0.5 (config 0.9)"). Structural problems throw naming the entry ("optimizer.state[3].exp_avg ...").
std::vector<std::string> load_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);

// The update rules the torch.optim form's param_groups allow: SGD ("momentum"); Adam or AdamW ("betas", told apart
// by decoupled_weight_decay; a torch from before that key wrote the same groups for both, so such a file allows
// both); none if neither.
std::vector<OptimizerName> optimizers_from_param_groups(const c10::impl::GenericDict& state);

// Checkpoint format 1: keys "<parameter index>.<field>" ("3.momentum_buffer", "3.exp_avg", "3.step" as an int).
void load_flat_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);

}  // namespace ddp
