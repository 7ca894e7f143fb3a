// RankGenerators: gathering, checking and restoring each rank's generator states.
#include "train/rank_generators.h"

#include "checkpoint/checkpoint_entries.h"
#include "distributed/reduce.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <mutex>
#include <stdexcept>

namespace ddp {
namespace {

c10::List<at::Tensor> gathered(const DistContext& ctx, const torch::Tensor& state) {
  c10::List<at::Tensor> out;
  for (auto& t : all_gather(ctx, state)) out.push_back(t.cpu());
  return out;
}

// The rank's entry of a per-rank list of states, else a seed from the job's seed, the rank and the step.
void restore(at::Generator gen, const std::vector<torch::Tensor>& per_rank, int64_t rank, uint64_t fallback_seed) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  if (rank < static_cast<int64_t>(per_rank.size()))
    gen.set_state(per_rank[static_cast<size_t>(rank)]);
  else
    gen.set_current_seed(fallback_seed);
}

}  // namespace

void RankGenerators::seed_per_rank() const {
  torch::manual_seed(static_cast<uint64_t>(seed_) + static_cast<uint64_t>(ctx_.rank));
}

void RankGenerators::state_dict(c10::impl::GenericDict& out) const {
  out.insert("rng_cpu", gathered(ctx_, at::detail::getDefaultCPUGenerator().get_state()));
  out.insert("rng_cuda", ctx_.device.is_cuda()
                             ? gathered(ctx_, at::globalContext().defaultGenerator(ctx_.device).get_state())
                             : c10::List<at::Tensor>());
}

void RankGenerators::check_state_dict(const c10::impl::GenericDict& state) {
  const int64_t state_bytes = at::detail::getDefaultCPUGenerator().get_state().numel();
  for (const auto& t : ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"))
    if (t.scalar_type() != at::kByte || t.dim() != 1 || t.numel() != state_bytes)
      throw std::runtime_error(
          "checkpoint entry \"rng_cpu\" holds a tensor that is not a CPU generator state "
          "(expected " +
          std::to_string(state_bytes) + " uint8 values)");
}

void RankGenerators::load_state_dict(const c10::impl::GenericDict& state, int64_t global_step) const {
  const uint64_t fallback = static_cast<uint64_t>(seed_ + ctx_.rank + global_step);
  restore(at::detail::getDefaultCPUGenerator(),
          ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"), ctx_.rank, fallback);
  // A CUDA run's generators too (rng_cuda is empty in a CPU run's checkpoint and absent in older ones); a CUDA run's
  // checkpoint resumes on CPU with the CPU generators alone.
  if (ctx_.device.is_cuda())
    restore(at::globalContext().defaultGenerator(ctx_.device),
            ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cuda"), "rng_cuda"), ctx_.rank, fallback);
}

}  // namespace ddp
