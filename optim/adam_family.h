// What torch.optim.Adam and AdamW share: torch 2.11's AdamW is Adam with decoupled_weight_decay=True, so both
// write the same param_groups keys and per-parameter state; LibTorch has a class of each for options and state.
#pragma once

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

// One key of a param_groups entry; `changes_update` is false for the keys that say how torch runs the update
// (foreach, fused, ...), not what it computes.
struct GroupField {
  std::string key;
  c10::IValue value;
  bool changes_update = true;
};

// The hyperparameters of an Adam or AdamW param_groups entry after "lr", in torch's order ("params" follows).
template <class Options>
std::vector<GroupField> adam_group_fields(const Options& a, bool decoupled_weight_decay) {
  return {{"betas", c10::ivalue::Tuple::create({std::get<0>(a.betas()), std::get<1>(a.betas())})},
          {"eps", a.eps()},
          {"weight_decay", a.weight_decay()},
          {"amsgrad", a.amsgrad()},
          {"maximize", false},
          {"foreach", c10::IValue(), false},
          {"capturable", false, false},
          {"differentiable", false, false},
          {"fused", c10::IValue(), false},
          {"decoupled_weight_decay", decoupled_weight_decay}};
}

// Calls f(options, decoupled_weight_decay) when `options` are Adam's or AdamW's; false when neither.
template <class F>
bool with_adam_options(const torch::optim::OptimizerOptions& options, F&& f) {
  if (auto* w = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) {
    f(*w, true);
    return true;
  }
  if (auto* a = dynamic_cast<const torch::optim::AdamOptions*>(&options)) {
    f(*a, false);
    return true;
  }
  return false;
}

// Calls f(state) when `state` is Adam's or AdamW's (step, exp_avg, exp_avg_sq[, max_exp_avg_sq]); false otherwise.
template <class F>
bool with_adam_state(const torch::optim::OptimizerParamState& state, F&& f) {
  if (auto* w = dynamic_cast<const torch::optim::AdamWParamState*>(&state)) {
    f(*w);
    return true;
  }
  if (auto* a = dynamic_cast<const torch::optim::AdamParamState*>(&state)) {
    f(*a);
    return true;
  }
  return false;
}

// A fresh per-parameter state of the optimizer's kind: AdamW's for AdamW, Adam's for Adam; null for others.
template <class F>
std::unique_ptr<torch::optim::OptimizerParamState> new_adam_state(const torch::optim::Optimizer& opt, F&& fill) {
  if (dynamic_cast<const torch::optim::AdamW*>(&opt)) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    fill(*s);
    return s;
  }
  if (dynamic_cast<const torch::optim::Adam*>(&opt)) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    fill(*s);
    return s;
  }
  return nullptr;
}

}  // namespace ddp
