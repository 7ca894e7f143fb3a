// Optimizer state (momentum buffers, Adam moments and step counts) to and from a flat, torch.load-readable dict.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

namespace ddp {

// Keys are "<parameter index>.<field>" over the optimizer's parameters in order, e.g. "3.momentum_buffer",
// "3.exp_avg", "3.step". Tensors are cloned.
c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt);
// Restores what optimizer_state_dict wrote; unknown keys or shape mismatches throw naming the key.
void load_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state);

}  // namespace ddp
