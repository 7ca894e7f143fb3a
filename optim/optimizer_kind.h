// OptimizerKind: one row per optimizer.name, declared in the optimizer's own file and listed once in
// optim/registry.cpp: its config row, its factory and which torch.optim state_dict()s it can have written.
#pragma once

#include "config/config.h"
#include "optim/param_groups.h"

#include <ATen/core/Dict.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace ddp {

struct OptimizerKind {
  OptimizerKeyRow keys;  // what config loading reads: name, torch.optim class, [optimizer] keys, rules
  // The optimizer over `groups` (each with its weight decay) with base learning rate `lr` (already scaled for world
  // size if asked).
  std::function<std::unique_ptr<torch::optim::Optimizer>(const OptimizerConfig& cfg, double lr,
                                                         const std::vector<ParamGroup>& groups)>
      make;
  // Whether a torch.optim state_dict() whose first param_groups entry is `group` may be this optimizer's.
  std::function<bool(const c10::impl::GenericDict& group)> wrote;
};

// Every optimizer kind, in the order --help lists optimizer.name's names.
const std::vector<const OptimizerKind*>& optimizer_kinds();

// The kind named `name`; throws std::invalid_argument for a name without one.
const OptimizerKind& optimizer_kind(std::string_view name);

}  // namespace ddp
