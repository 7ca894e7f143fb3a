// TrainState's checkpoint entries: written, range-checked, restored (derived where a Python checkpoint lacks them).
#include "train/train_state.h"

#include "checkpoint/checkpoint_entries.h"

#include <algorithm>
#include <stdexcept>

namespace ddp {
namespace {

// An int entry that must lie in [lo, hi]; `fallback` when absent.
int64_t ranged_entry(const c10::impl::GenericDict& d, const std::string& key, int64_t lo, int64_t hi,
                     int64_t fallback) {
  const c10::IValue* v = ckpt_optional_entry(d, key);
  if (!v) return fallback;
  const int64_t x = ckpt_int_entry(*v, key);
  if (x < lo || x > hi)
    throw std::runtime_error("checkpoint entry \"" + key + "\" is " + std::to_string(x) + ", outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// A list of ints (as written, or read back from a pickle as a generic list).
std::vector<int64_t> int_list_entry(const c10::IValue& v, const std::string& key) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) ckpt_wrong_entry_type(key, v, "a list of ints");
  std::vector<int64_t> out;
  for (const c10::IValue& x : v.toListRef()) out.push_back(ckpt_int_entry(x, key));
  return out;
}

// Bounds no honest checkpoint comes near; they keep every product below int64's range.
constexpr int64_t kMaxStepEntry = int64_t{1} << 53;
constexpr int64_t kMaxWorldEntry = int64_t{1} << 20;
constexpr int64_t kMaxBatchEntry = int64_t{1} << 31;

}  // namespace

void TrainState::state_dict(c10::impl::GenericDict& out) const {
  out.insert("global_step", global_step);
  out.insert("epoch", position.epoch);
  out.insert("batch_in_epoch", position.batch_in_epoch);
  out.insert("epoch_sample_offset", position.sample_offset);
  out.insert("epoch_order_world", position.order_world > 0 ? position.order_world : world_size);
  out.insert("batch_size", batch_size);
  out.insert("world_size", world_size);
  out.insert("best_accuracy", best_accuracy);
  out.insert("world_size_history", c10::List<int64_t>(world_sizes));
}

std::string TrainState::world_sizes_text(int64_t last_step) const {
  if (world_sizes.size() <= 2) return "";
  std::string text;
  for (size_t i = 0; i + 1 < world_sizes.size(); i += 2) {
    const int64_t first = world_sizes[i], last = i + 2 < world_sizes.size() ? world_sizes[i + 2] - 1 : last_step;
    text += (text.empty() ? "steps " : ", ") + std::to_string(first) + "-" + std::to_string(last) + ": " +
            std::to_string(world_sizes[i + 1]) + (world_sizes[i + 1] == 1 ? " rank" : " ranks");
  }
  return text;
}

void TrainState::check_state_dict(const c10::impl::GenericDict& state, int64_t train_size) {
  const int64_t step = ranged_entry(state, "global_step", 0, kMaxStepEntry, -1);
  if (step < 0) ckpt_required_entry(state, "global_step");  // throws: absent
  ranged_entry(state, "epoch", 0, step, 0);                 // every finished epoch took at least one step
  const int64_t world = ranged_entry(state, "world_size", 1, kMaxWorldEntry, 1);
  const int64_t batch = ranged_entry(state, "batch_size", 1, kMaxBatchEntry, 1);
  // The epoch's global order: the split padded to a multiple of the world it was ordered for (ShardSampler's order of
  // an epoch an earlier world began; DistributedSampler's padding is less), and a complete epoch's last batch may be
  // partial on every rank: a position lies within the padded order and one global batch past it.
  const int64_t order_world = ranged_entry(state, "epoch_order_world", 1, kMaxWorldEntry, world);
  const int64_t padded = (train_size + order_world - 1) / order_world * order_world;
  const int64_t end = padded + world * batch;
  // Micro-batches one rank of the saved world has in an epoch (at most; drop_last has fewer).
  const int64_t per_rank = (padded + world - 1) / world;
  const int64_t batches = (per_rank + batch - 1) / batch;
  const int64_t in_epoch = ranged_entry(state, "batch_in_epoch", 0, batches, 0);
  const int64_t offset = ranged_entry(state, "epoch_sample_offset", 0, end, 0);
  const int64_t at = offset + in_epoch * batch * world;  // where a re-sharded resume continues
  if (at > end)
    throw std::runtime_error(
        "checkpoint entries \"epoch_sample_offset\" + \"batch_in_epoch\" x \"batch_size\" x "
        "\"world_size\" = " +
        std::to_string(at) + " lie beyond the epoch's " + std::to_string(padded) + " samples and a global batch");
  if (const c10::IValue* history = ckpt_optional_entry(state, "world_size_history")) {
    const auto h = int_list_entry(*history, "world_size_history");
    bool ok = !h.empty() && h.size() % 2 == 0;
    for (size_t i = 0; ok && i < h.size(); i += 2)
      ok = h[i] >= 1 && h[i] <= step + 1 && (i == 0 || h[i] > h[i - 2]) && h[i + 1] >= 1 && h[i + 1] <= kMaxWorldEntry;
    if (!ok)
      throw std::runtime_error(
          "checkpoint entry \"world_size_history\" is not (first step, world size) pairs with ascending steps in [1, " +
          std::to_string(step + 1) + "] and world sizes in [1, " + std::to_string(kMaxWorldEntry) + "]");
  }
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy")) {
    if (!best->isDouble() && !best->isInt()) ckpt_wrong_entry_type("best_accuracy", *best, "a float");
    const double b = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
    if (!(b >= 0 && b <= 1))
      throw std::runtime_error("checkpoint entry \"best_accuracy\" is " + std::to_string(b) + ", outside [0, 1]");
  }
}

std::string TrainState::load_state_dict(const c10::impl::GenericDict& state, const StepsPerEpoch& steps_per_epoch,
                                        int64_t grad_accum_steps) {
  global_step = ckpt_int_entry(ckpt_required_entry(state, "global_step"), "global_step");
  const c10::IValue* world = ckpt_optional_entry(state, "world_size");
  const c10::IValue* batch_entry = ckpt_optional_entry(state, "batch_size");
  const int64_t saved_world = world ? ckpt_int_entry(*world, "world_size") : world_size;
  const int64_t saved_batch = batch_entry ? ckpt_int_entry(*batch_entry, "batch_size") : batch_size;
  const c10::IValue* epoch = ckpt_optional_entry(state, "epoch");
  const c10::IValue* batch = ckpt_optional_entry(state, "batch_in_epoch");
  if (epoch && batch) {
    position.epoch = ckpt_int_entry(*epoch, "epoch");
    position.batch_in_epoch = ckpt_int_entry(*batch, "batch_in_epoch");
  } else {  // derived: global_step optimizer steps of the writing run's epochs, grad_accum_steps micro-batches a step
    const int64_t per_epoch = std::max<int64_t>(1, steps_per_epoch(saved_world, saved_batch));
    position.epoch = global_step / per_epoch;
    position.batch_in_epoch = (global_step % per_epoch) * grad_accum_steps;
  }
  const c10::IValue* offset = ckpt_optional_entry(state, "epoch_sample_offset");
  position.sample_offset = offset ? ckpt_int_entry(*offset, "epoch_sample_offset") : 0;
  const c10::IValue* order_world = ckpt_optional_entry(state, "epoch_order_world");
  position.order_world = order_world ? ckpt_int_entry(*order_world, "epoch_order_world") : 0;
  // An epoch not begun (a checkpoint at an epoch's end) is ordered for whichever world trains it.
  if (position.batch_in_epoch == 0 && position.sample_offset == 0) position.order_world = 0;
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy"))
    best_accuracy = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
  const c10::IValue* history = ckpt_optional_entry(state, "world_size_history");
  world_sizes = history ? int_list_entry(*history, "world_size_history") : std::vector<int64_t>{1, saved_world};
  if (world_sizes.back() != world_size) {
    if (world_sizes[world_sizes.size() - 2] == global_step + 1) world_sizes.resize(world_sizes.size() - 2);
    if (world_sizes.empty() || world_sizes.back() != world_size)
      world_sizes.insert(world_sizes.end(), {global_step + 1, world_size});
  }
  if (saved_world == world_size && saved_batch == batch_size) return "";
  position.reshard(saved_world, saved_batch);
  return "checkpoint was written by " + std::to_string(saved_world) + " rank(s) x batch " +
         std::to_string(saved_batch) + ", resuming on " + std::to_string(world_size) + " x " +
         std::to_string(batch_size) + ": epoch " + std::to_string(position.epoch + 1) + " continues from sample " +
         std::to_string(position.sample_offset) +
         " of the global order, re-sharded (not bit-identical to an uninterrupted run)";
}

}  // namespace ddp
