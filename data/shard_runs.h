// ShardRuns: the samples of plain tar shards, local or HTTP, read a run of consecutive samples at a time (one preadv or
// one Range request each, each sample into a buffer of its own), the runs of the samples the loader says are coming
// read ahead on a few threads (which keep their HTTP connections open).
#pragma once

#include "data/shard_index.h"
#include "data/shard_source.h"

#include <c10/core/thread_pool.h>

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

// A shard as ShardRuns reads it: its file or URL, its index, and the first sample of each of its runs (range_runs).
struct RangedShard {
  const std::string& path;
  const ShardIndex& index;
  const std::vector<int64_t>& runs;
};

// The runs of consecutive samples of `index` read with one read each (at most 2 MiB, or one sample when it is larger):
// their first samples. A read's cost (a request, a system call) is shared by its run.
std::vector<int64_t> range_runs(const ShardIndex& index);

class ShardRuns {
 public:
  // `threads` threads read the runs, at most `max_ahead` at once for coming(); at most `max_runs` runs are held (read,
  // or keeping samples not asked for yet): beyond, the least recently used that is not being read is dropped (asked
  // for later, it is read again).
  ShardRuns(ShardFetch fetch, size_t threads, size_t max_ahead, size_t max_runs);
  ~ShardRuns();
  ShardRuns(const ShardRuns&) = delete;
  ShardRuns& operator=(const ShardRuns&) = delete;

  // Sample i's bytes of shard number s: from its run, read now unless told as coming (every sample of a run is asked
  // for once an epoch, so each run is read once). Throws StorageError naming the shard when an HTTP shard's run
  // cannot be read after data.shard_retries. A local shard's run that cannot be read (a damaged shard) is left, and
  // the sample alone is read as read_shard_bytes reads it (its error, if it is itself unreadable).
  std::string sample(size_t s, const RangedShard& shard, int64_t i);
  // Sample i of shard number s will be asked for soon: its run is read ahead unless it is held or being read, or
  // `max_ahead` runs are being read already. Does not wait.
  void coming(size_t s, const RangedShard& shard, int64_t i);

 private:
  using Key = std::pair<size_t, int64_t>;  // (shard number, first sample of the run)
  // A run's samples as read: each sample's bytes and those up to the next sample's (a gap the index leaves out).
  using Pieces = std::shared_ptr<std::vector<std::string>>;
  struct Run {
    std::shared_future<Pieces> pieces;    // valid while the run is read and not yet taken apart into `kept`
    std::map<int64_t, std::string> kept;  // its samples not asked for yet, once read
    uint64_t used = 0;
    bool being_read() const;
  };
  // The key of the run of shard number s that holds sample i.
  static Key run_of(size_t s, const RangedShard& shard, int64_t i);
  // Under mu_: starts reading the run `key` on the threads.
  void start(const Key& key, const RangedShard& shard, Run& run);
  // Under mu_: whether another run may be read ahead (fewer than max_ahead are being read).
  bool room_ahead() const;
  // Under mu_: drops the least recently used runs beyond max_runs_ that are not being read.
  void trim();

  ShardFetch fetch_;
  size_t max_ahead_, max_runs_;
  std::mutex mu_;
  std::map<Key, Run> runs_;
  uint64_t clock_ = 0;
  c10::ThreadPool pool_;  // last: destroyed first, its threads gone before the runs they fill
};

}  // namespace ddp
