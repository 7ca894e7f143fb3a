// Checkpoint entries: typed reads with one error message per kind of problem, and the position range checks.
#include "checkpoint/checkpoint_entries.h"

#include "base/python_kind.h"

#include <ATen/CPUGeneratorImpl.h>

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

namespace {

// An int entry that must lie in [lo, hi]; `fallback` when absent.
int64_t ckpt_ranged_int(const c10::impl::GenericDict& d, const std::string& key, int64_t lo, int64_t hi,
                        int64_t fallback) {
  const c10::IValue* v = ckpt_optional_entry(d, key);
  if (!v) return fallback;
  const int64_t x = ckpt_int_entry(*v, key);
  if (x < lo || x > hi)
    throw std::runtime_error("checkpoint entry \"" + key + "\" is " + std::to_string(x) + ", outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// Bounds no honest checkpoint comes near; they keep every product below int64's range.
constexpr int64_t kCkptMaxStep = int64_t{1} << 53;
constexpr int64_t kCkptMaxWorld = int64_t{1} << 20;
constexpr int64_t kCkptMaxBatch = int64_t{1} << 31;

}  // namespace

void ckpt_check_position(const c10::impl::GenericDict& state, int64_t train_size) {
  const int64_t step = ckpt_ranged_int(state, "global_step", 0, kCkptMaxStep, -1);
  if (step < 0) ckpt_required_entry(state, "global_step");  // throws: absent
  ckpt_ranged_int(state, "epoch", 0, step, 0);  // every finished epoch took at least one step
  const int64_t world = ckpt_ranged_int(state, "world_size", 1, kCkptMaxWorld, 1);
  const int64_t batch = ckpt_ranged_int(state, "batch_size", 1, kCkptMaxBatch, 1);
  // Micro-batches one rank of the saved world has in an epoch (at most; drop_last has fewer).
  const int64_t per_rank = (train_size + world - 1) / world;
  const int64_t batches = (per_rank + batch - 1) / batch;
  const int64_t in_epoch = ckpt_ranged_int(state, "batch_in_epoch", 0, batches, 0);
  const int64_t offset = ckpt_ranged_int(state, "epoch_sample_offset", 0, train_size, 0);
  // The position a re-sharded resume continues from: within the (padded) epoch.
  const int64_t position = offset + in_epoch * batch * world;
  if (position > train_size + world * batch)
    throw std::runtime_error("checkpoint entries \"epoch_sample_offset\" + \"batch_in_epoch\" x \"batch_size\" x "
                             "\"world_size\" = " + std::to_string(position) + " lie beyond the epoch's " +
                             std::to_string(train_size) + " samples");
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy")) {
    if (!best->isDouble() && !best->isInt()) ckpt_wrong_entry_type("best_accuracy", *best, "a float");
    const double b = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
    if (!(b >= 0 && b <= 1))
      throw std::runtime_error("checkpoint entry \"best_accuracy\" is " + std::to_string(b) + ", outside [0, 1]");
  }
  const int64_t state_bytes = at::detail::getDefaultCPUGenerator().get_state().numel();
  for (const auto& t : ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"))
    if (t.scalar_type() != at::kByte || t.dim() != 1 || t.numel() != state_bytes)
      throw std::runtime_error("checkpoint entry \"rng_cpu\" holds a tensor that is not a CPU generator state "
                               "(expected " + std::to_string(state_bytes) + " uint8 values)");
  if (const c10::IValue* scaler = ckpt_optional_entry(state, "scaler")) {
    for (const auto& item : ckpt_dict_entry(*scaler, "scaler")) {
      const c10::IValue& v = item.value();
      const double x = v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : 0.0;
      const std::string key = item.key().isString() ? item.key().toStringRef() : "?";
      const bool ok = (v.isDouble() || v.isInt()) && std::isfinite(x) &&
                      (key == "_growth_tracker" ? x >= 0 && x <= 1e9 : key == "growth_interval" ? x >= 1 && x <= 1e9
                                                                                               : x > 0);
      if (!ok) throw std::runtime_error("checkpoint entry \"scaler\" field \"" + key + "\" is out of range");
    }
  }
}


}  // namespace ddp
