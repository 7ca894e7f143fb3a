// DistributedDataParallel's c10d::Reducer: its one bucket rebuild, and the rebuilt layout a checkpoint carries.
#pragma once

#include "distributed/ddp.h"

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <utility>
#include <vector>

namespace ddp {

class DistributedDataParallel::Reducer : public c10d::Reducer {
 public:
  using c10d::Reducer::Reducer;
  // Whether the one bucket rebuild is due at the next rebuild_buckets() (the same test the Reducer makes).
  bool rebuild_due() const { return should_rebuild_buckets() && !rebuilt_params_.empty(); }
  // The rebuilt layout, as the Reducer would have built it in gradient-ready order: no rebuild follows.
  void adopt_rebuilt_layout(std::vector<std::vector<size_t>> bucket_indices) {
    initialize_buckets(std::move(bucket_indices));
    has_rebuilt_bucket_ = true;
    rebuilt_params_.clear();
    rebuilt_param_indices_.clear();
  }
};

}  // namespace ddp
