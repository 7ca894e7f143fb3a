// ShardRuns: runs of shards read on c10::ThreadPool threads (each keeps its libcurl connection), each sample into a
// buffer of its own, handed out as they are asked for.
#include "data/shard_runs.h"

#include "base/thread_name.h"
#include "data/shard_patterns.h"
#include "data/storage_error.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

namespace ddp {
namespace {

// The most bytes one Range request asks for (more when one sample is larger).
constexpr int64_t kRunBytes = int64_t{2} << 20;

int64_t offset_of(const ShardIndex& index, int64_t i) { return index.offsets[static_cast<size_t>(i)]; }
int64_t end_of(const ShardIndex& index, int64_t i) {
  return index.offsets[static_cast<size_t>(i)] + index.lengths[static_cast<size_t>(i)];
}

// The sample after the last of the run that starts at `first`.
int64_t run_end(const RangedShard& shard, int64_t first) {
  const auto next = std::upper_bound(shard.runs.begin(), shard.runs.end(), first);
  return next == shard.runs.end() ? shard.index.size() : *next;
}

}  // namespace

std::vector<int64_t> range_runs(const ShardIndex& index) {
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < index.size(); ++i)
    if (starts.empty() || end_of(index, i) - offset_of(index, starts.back()) > kRunBytes) starts.push_back(i);
  return starts;
}

ShardRuns::ShardRuns(ShardFetch fetch, size_t threads, size_t max_ahead, size_t max_runs)
    : fetch_(fetch),
      max_ahead_(max_ahead),
      max_runs_(max_runs),
      pool_(static_cast<int>(std::max<size_t>(1, threads)), -1, [] { name_this_thread("ddp-shard-runs"); }) {}

ShardRuns::~ShardRuns() = default;

ShardRuns::Key ShardRuns::run_of(size_t s, const RangedShard& shard, int64_t i) {
  return {s, *(std::upper_bound(shard.runs.begin(), shard.runs.end(), i) - 1)};
}

void ShardRuns::start(const Key& key, const RangedShard& shard, Run& run) {
  const int64_t first = key.second, end = run_end(shard, first);
  std::vector<int64_t> sizes;  // each sample's bytes up to the next sample's
  for (int64_t k = first; k < end; ++k)
    sizes.push_back((k + 1 < end ? offset_of(shard.index, k + 1) : end_of(shard.index, k)) - offset_of(shard.index, k));
  auto promise = std::make_shared<std::promise<Pieces>>();
  run.pieces = promise->get_future().share();
  pool_.run([promise, path = shard.path, offset = offset_of(shard.index, first), sizes = std::move(sizes),
             shard_bytes = shard.index.shard_bytes, fetch = fetch_] {
    try {
      promise->set_value(
          std::make_shared<std::vector<std::string>>(read_shard_pieces(path, offset, sizes, shard_bytes, fetch)));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
}

bool ShardRuns::Run::being_read() const {
  return pieces.valid() && pieces.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

bool ShardRuns::room_ahead() const {
  return static_cast<size_t>(std::count_if(runs_.begin(), runs_.end(),
                                           [](const auto& r) { return r.second.being_read(); })) < max_ahead_;
}

void ShardRuns::trim() {
  while (runs_.size() > max_runs_) {
    auto oldest = runs_.end();
    for (auto it = runs_.begin(); it != runs_.end(); ++it)
      if (!it->second.being_read() && (oldest == runs_.end() || it->second.used < oldest->second.used)) oldest = it;
    if (oldest == runs_.end()) return;
    runs_.erase(oldest);
  }
}

void ShardRuns::coming(size_t s, const RangedShard& shard, int64_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  const Key key = run_of(s, shard, i);
  const auto it = runs_.find(key);
  if (it != runs_.end() && (it->second.pieces.valid() || it->second.kept.count(i))) return;
  if (!room_ahead()) return;
  Run& run = runs_[key];
  run.used = ++clock_;
  start(key, shard, run);
  trim();
}

std::string ShardRuns::sample(size_t s, const RangedShard& shard, int64_t i) {
  std::unique_lock<std::mutex> lock(mu_);
  const Key key = run_of(s, shard, i);
  const auto take_kept = [&](Run& run) -> std::optional<std::string> {
    const auto kept = run.kept.find(i);
    if (kept == run.kept.end()) return std::nullopt;
    std::string sample = std::move(kept->second);
    run.kept.erase(kept);
    if (run.kept.empty() && !run.pieces.valid()) runs_.erase(key);
    return sample;
  };
  std::shared_future<Pieces> pieces;
  {
    Run& run = runs_[key];
    run.used = ++clock_;
    if (std::optional<std::string> sample = take_kept(run)) return std::move(*sample);
    if (!run.pieces.valid()) start(key, shard, run);  // not read ahead, or read before and i dropped since
    pieces = run.pieces;
  }
  trim();
  lock.unlock();
  const auto alone = [&] {
    return read_shard_bytes(shard.path, offset_of(shard.index, i), shard.index.lengths[static_cast<size_t>(i)],
                            shard.index.shard_bytes, fetch_);
  };
  try {
    pieces.get();  // a failed read's error
  } catch (const std::exception& e) {
    lock.lock();
    if (auto it = runs_.find(key); it != runs_.end() && it->second.pieces.valid() && !it->second.being_read()) {
      it->second.pieces = {};  // the next ask reads the run again
      if (it->second.kept.empty()) runs_.erase(it);
    }
    lock.unlock();
    if (dynamic_cast<const StorageError*>(&e) || http_shard(shard.path)) throw;
    return alone();
  }
  lock.lock();
  Run& run = runs_[key];
  if (run.pieces.valid() && !run.being_read() &&
      run.pieces.get() == pieces.get()) {  // the first of its samples' readers to get here takes the run apart
    std::vector<std::string>& all = *pieces.get();
    const int64_t first = key.second;
    for (size_t k = 0; k < all.size(); ++k) {
      all[k].resize(static_cast<size_t>(shard.index.lengths[static_cast<size_t>(first) + k]));  // the gap left out
      run.kept.emplace_hint(run.kept.end(), first + static_cast<int64_t>(k), std::move(all[k]));
    }
    run.pieces = {};
  }
  if (std::optional<std::string> sample = take_kept(run)) return std::move(*sample);
  // Taken apart by another reader and dropped (trim) before this one got here: rare, read alone.
  if (run.kept.empty() && !run.pieces.valid()) runs_.erase(key);
  lock.unlock();
  return alone();
}

}  // namespace ddp
