// Checkpoint entries: typed reads with one error message per kind of problem, and the position range checks.
#include "checkpoint/checkpoint_entries.h"

#include "base/python_kind.h"

#include <cmath>
#include <stdexcept>

namespace ddp {
namespace {

// Entries a checkpoint must have (Python-written ones included); everything else has a default.
constexpr const char* kCkptRequiredEntries = "model, optimizer and global_step";

}  // namespace

const c10::IValue& ckpt_required_entry(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end())
    throw std::runtime_error("checkpoint has no \"" + key + "\" entry (a checkpoint needs " + kCkptRequiredEntries +
                             ")");
  return it->value();
}

const c10::IValue* ckpt_optional_entry(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  return it == d.end() ? nullptr : &it->value();
}

[[noreturn]] void ckpt_wrong_entry_type(const std::string& key, const c10::IValue& v, const char* expected) {
  throw std::runtime_error("checkpoint entry \"" + key + "\" is " + python_kind(v) + ", expected " + expected);
}

int64_t ckpt_int_entry(const c10::IValue& v, const std::string& key) {
  if (!v.isInt()) ckpt_wrong_entry_type(key, v, "an int");
  return v.toInt();
}

c10::impl::GenericDict ckpt_dict_entry(const c10::IValue& v, const std::string& key) {
  if (!v.isGenericDict()) ckpt_wrong_entry_type(key, v, "a dict");
  return v.toGenericDict();
}

std::vector<torch::Tensor> ckpt_tensor_list_entry(const c10::IValue* v, const std::string& key) {
  std::vector<torch::Tensor> out;
  if (!v) return out;
  if (!v->isList()) ckpt_wrong_entry_type(key, *v, "a list of tensors");
  for (const auto& x : v->toListRef()) {
    if (!x.isTensor()) ckpt_wrong_entry_type(key, *v, "a list of tensors");
    out.push_back(x.toTensor());
  }
  return out;
}

NamedTensors ckpt_model_entry(const c10::impl::GenericDict& state) {
  NamedTensors model;
  for (const auto& item : ckpt_dict_entry(ckpt_required_entry(state, "model"), "model")) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::runtime_error("checkpoint entry \"model\" is not a dict of name -> tensor");
    model.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return model;
}

}  // namespace ddp
