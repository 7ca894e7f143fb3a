// RankGenerators: each rank's random streams (CPU: dropout; a CUDA run's device generator), as checkpoint entries.
#pragma once

#include "distributed/context.h"

#include <ATen/core/Dict.h>

#include <cstdint>

namespace ddp {

class RankGenerators {
 public:
  RankGenerators(DistContext ctx, int64_t seed) : ctx_(std::move(ctx)), seed_(seed) {}

  // torch.manual_seed(seed + rank): a distinct, reproducible stream per rank.
  void seed_per_rank() const;
  // rng_cpu and rng_cuda: every rank's torch.get_rng_state() and, on a CUDA run, torch.cuda.get_rng_state() (an
  // empty list on CPU), gathered from all ranks in rank order; collective.
  void state_dict(c10::impl::GenericDict& out) const;
  // rng_cpu holds CPU generator states only: throws naming the entry.
  static void check_state_dict(const c10::impl::GenericDict& state);
  // This rank's entries; where there is none (a Python checkpoint, fewer ranks, rng_cuda of a CPU run) the generator
  // is seeded seed + rank + global_step instead: a fresh, reproducible stream.
  void load_state_dict(const c10::impl::GenericDict& state, int64_t global_step) const;

 private:
  DistContext ctx_;
  int64_t seed_;
};

}  // namespace ddp
