// on_rank_zero: io on rank 0, its failure all-reduced (MAX) to every rank.
#include "distributed/rank_zero.h"

#include "distributed/reduce.h"

#include <exception>

namespace ddp {

RankZeroOutcome on_rank_zero(const DistContext& ctx, const std::function<void()>& io) {
  RankZeroOutcome out;
  bool local_failure = false;
  if (ctx.is_main()) {
    try {
      io();
    } catch (const std::exception& e) {
      out.error = e.what();
      local_failure = true;
    }
  }
  out.failed = all_reduce_max(ctx, local_failure ? 1.0 : 0.0) > 0;
  return out;
}

}  // namespace ddp
