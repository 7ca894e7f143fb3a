// DistributedDataParallel's checkpoint entries: the Reducer's rebuilt bucket layout, saved and adopted on resume, and
// the PowerSGD hook's state.
#include "base/host_copy.h"
#include "distributed/ddp.h"
#include "distributed/ddp_reducer.h"
#include "distributed/reduce.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

namespace ddp {
namespace {

constexpr const char* kBucketsEntry = "ddp_buckets";
constexpr const char* kPowerSgdEntry = "powersgd";

std::runtime_error bad_buckets_entry(const std::string& why) {
  return std::runtime_error(std::string("checkpoint entry \"") + kBucketsEntry + "\": " + why);
}

// The entry as bucket -> parameter indices, checked to be a layout of exactly `params` parameters.
std::vector<std::vector<size_t>> bucket_layout_of(const c10::IValue& entry, size_t params) {
  if (!entry.isList()) throw bad_buckets_entry("not a list of buckets but a " + entry.tagKind());
  std::vector<std::vector<size_t>> layout;
  std::vector<bool> seen(params, false);
  for (const c10::IValue& bucket : entry.toListRef()) {
    if (!bucket.isList()) throw bad_buckets_entry("a bucket is not a list of parameter indices");
    auto& indices = layout.emplace_back();
    for (const c10::IValue& index : bucket.toListRef()) {
      if (!index.isInt() || index.toInt() < 0 || static_cast<size_t>(index.toInt()) >= params)
        throw bad_buckets_entry("a parameter index is not an int in [0, " + std::to_string(params) + ")");
      const auto i = static_cast<size_t>(index.toInt());
      if (seen[i]) throw bad_buckets_entry("parameter " + std::to_string(i) + " is in two buckets");
      seen[i] = true;
      indices.push_back(i);
    }
    if (indices.empty()) throw bad_buckets_entry("a bucket is empty");
  }
  for (size_t i = 0; i < params; ++i)
    if (!seen[i])
      throw bad_buckets_entry("parameter " + std::to_string(i) + " is in no bucket (a model of " +
                              std::to_string(params) + " trainable parameters)");
  return layout;
}

}  // namespace

void DistributedDataParallel::state_dict(c10::impl::GenericDict& out) {
  // A rebuild due at the next forward is made now, as that forward would make it: the layout is the same.
  rebuild_buckets();
  if (powersgd_) {
    // Every rank holds residuals for the same buckets (the hook runs on each bucket of every rank).
    std::vector<std::map<int64_t, at::Tensor>> errors(static_cast<size_t>(ctx_.world_size));
    std::map<int64_t, at::Tensor> mine;
    {
      std::lock_guard<std::mutex> lock(powersgd_->mutex);
      mine = powersgd_->error;
    }
    for (const auto& [index, residual] : mine) {
      const std::vector<torch::Tensor> all = all_gather(ctx_, residual);
      // The gathered tensors are the all-gather's own: on the host they serve as they are.
      for (size_t r = 0; r < all.size(); ++r) errors[r][index] = all[r].is_cpu() ? all[r] : host_copy(all[r]);
    }
    out.insert(kPowerSgdEntry, powersgd_entry(*powersgd_, errors));
  }
  if (!buckets_rebuilt_) return;  // find_unused_parameters without static_graph: the Reducer never rebuilds
  std::unordered_map<const c10::TensorImpl*, int64_t> index_of;
  for (size_t i = 0; i < params_.size(); ++i) index_of[params_[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
  c10::impl::GenericList buckets(c10::ListType::ofInts());
  for (const auto& b : reducer_->get_grad_buckets(/*return_zero_tensors=*/false)) {
    c10::List<int64_t> indices;
    for (const auto& p : b.getParameters()) indices.push_back(index_of.at(p.unsafeGetTensorImpl()));
    buckets.push_back(std::move(indices));
  }
  out.insert(kBucketsEntry, std::move(buckets));
}

std::string DistributedDataParallel::load_state_dict(const c10::impl::GenericDict& state) {
  const auto entry = state.find(kBucketsEntry);
  if (entry != state.end()) {  // absent: saved before the rebuild, on one rank, or by an earlier ddptrain
    reducer_->adopt_rebuilt_layout(bucket_layout_of(entry->value(), params_.size()));
    buckets_rebuilt_ = true;
    ctx_.activity->set_gradient_buckets(static_cast<int64_t>(bucket_sizes().size()));
  }
  if (!powersgd_) return "";
  const auto powersgd = state.find(kPowerSgdEntry);
  if (powersgd == state.end())
    return "the checkpoint holds no PowerSGD state (written without dist.grad_compression = \"powersgd\"): "
           "gradients are all-reduced whole for dist.powersgd_start_step steps from here, then compressed";
  return load_powersgd_entry(*powersgd_, powersgd->value(), ctx_.rank, ctx_.world_size, ctx_.device);
}

}  // namespace ddp
