// TorchStateForm: how an optimizer writes and reads its state in torch.optim's state_dict() form; every optimizer
// ddptrain builds implements it beside its update rule.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

// One key of a param_groups entry; `changes_update` is false for the keys that say how torch runs the update
// (foreach, fused, capturable, ...), not what it computes: those are not compared on resume.
struct GroupField {
  std::string key;
  c10::IValue value;
  bool changes_update = true;
};

class TorchStateForm {
 public:
  virtual ~TorchStateForm() = default;
  // A param_groups entry's keys after "lr", in the order torch 2.11 writes them ("params" follows), for `options`.
  virtual std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const = 0;
  // What a param_groups entry `group` holds beyond hyperparameters (a step count kept per group, as timm's Lamb
  // keeps it), set into the group's `options`; nothing by default. Throws naming `where` for a misshapen value.
  virtual void group_state_from(const c10::impl::GenericDict& group, torch::optim::OptimizerOptions& options,
                                const std::string& where) const {}
  // A parameter's entry of "state" (torch's keys in torch's order; tensors as host_copy makes them); empty for no
  // state yet.
  virtual c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const = 0;
  // The state of parameter `p` from its entry `fields` (tensors copied to p's device and dtype); null for "no state
  // yet". Throws naming `where` ("optimizer.state[3]") for a missing or misshapen field.
  virtual std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                              const torch::Tensor& p,
                                                                              const std::string& where) const = 0;
};

// `opt`'s form; throws std::logic_error for an optimizer without one.
const TorchStateForm& torch_state_form(const torch::optim::Optimizer& opt);

}  // namespace ddp
