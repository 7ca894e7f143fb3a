// on_rank_zero: rank 0 alone does some I/O, then every rank learns whether it failed, so all stop together.
#pragma once

#include "distributed/context.h"

#include <functional>
#include <string>

namespace ddp {

struct RankZeroOutcome {
  bool failed = false;  // the same on every rank
  std::string error;    // rank 0's exception message, on rank 0 only
};

// Runs `io` on rank 0 (the other ranks skip it) and catches what it throws; then one all-reduce tells every rank
// the outcome. Collective: every rank must call it.
RankZeroOutcome on_rank_zero(const DistContext& ctx, const std::function<void()>& io);

}  // namespace ddp
