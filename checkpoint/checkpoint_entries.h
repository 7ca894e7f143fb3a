// Checkpoint entries: typed reads of a checkpoint dict's entries, each error naming the entry.
#pragma once

#include "checkpoint/state_dict.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// Each throws std::runtime_error naming the entry: absent (required), or of the wrong type.
const c10::IValue& ckpt_required_entry(const c10::impl::GenericDict& d, const std::string& key);
const c10::IValue* ckpt_optional_entry(const c10::impl::GenericDict& d, const std::string& key);  // null: absent
[[noreturn]] void ckpt_wrong_entry_type(const std::string& key, const c10::IValue& v, const char* expected);
int64_t ckpt_int_entry(const c10::IValue& v, const std::string& key);
c10::impl::GenericDict ckpt_dict_entry(const c10::IValue& v, const std::string& key);
std::vector<torch::Tensor> ckpt_tensor_list_entry(const c10::IValue* v, const std::string& key);  // {} when absent
NamedTensors ckpt_model_entry(const c10::impl::GenericDict& state);  // the "model" entry: name -> tensor

}  // namespace ddp
