// ShmSegment: a shared-memory file mapped by every rank of one host, with per-rank data slots and a barrier.
//
// Layout: a header (magic, token, world, slot size, abort word, one cache line per rank: barrier counter, count of
// peers asleep on it, pid, process start time), then two buffers of `world` slots of `slot_bytes` each. The barrier
// is a counter per rank waited on with futexes (woken only when someone sleeps); a wait gives up when the abort word
// is set, the peer's process is gone, or the timeout passes, and throws naming that rank.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ddp {

class ShmSegment {
 public:
  // Rank 0: makes an unnamed file in DIR (O_TMPFILE, 0600: nothing in DIR ever names it, so no kill can leave it
  // behind), sized and allocated up front (a full tmpfs fails here, not later with SIGBUS), with a fresh random
  // token. Peers open it through /proc/<rank 0's pid>/fd/<fd> (path()) until close_for_peers().
  static std::unique_ptr<ShmSegment> create(const std::string& dir, int world, size_t slot_bytes);
  // Other ranks: maps `path` (rank 0's path() under this rank's proc dir) and checks the magic, `token` and world.
  static std::unique_ptr<ShmSegment> open(const std::string& path, uint64_t token, int rank, int world);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  const std::string& path() const { return path_; }
  uint64_t token() const;
  size_t slot_bytes() const { return slot_bytes_; }
  int world() const { return world_; }
  int rank() const { return rank_; }

  // Rank 0, once every rank has mapped it (or given up): closes the file, so no other process can open it any more;
  // the mappings stay valid and the memory goes with the last one.
  void close_for_peers();
  // Reads every peer's pid and start time (written at create/open) so waits can tell a dead peer.
  void learn_peers();
  // Errors name the segment's rank r as the job's rank first + r (a node's segment in the hierarchical all-reduce).
  void name_ranks_from(int first) { first_rank_ = first; }

  // Slot `rank` of buffer `buffer` (0 or 1).
  char* slot(int buffer, int rank) const;

  // Every rank arrives, then waits for all others to arrive at the same count: spinning for up to `spin` first (for
  // a caller whose peers run on cores of their own), then sleeping on a futex.
  void barrier(std::chrono::milliseconds timeout, std::chrono::microseconds spin = std::chrono::microseconds(0));
  // Marks the segment broken (others' waits then fail naming this rank) and makes this rank's waits fail within
  // 20 ms. Callable from any thread.
  void abort();

 private:
  ShmSegment() = default;
  void map(int fd, size_t bytes);
  void register_self();  // this rank's pid and start time into its cell
  void wait_for(int peer, uint32_t target, std::chrono::milliseconds timeout, std::chrono::microseconds spin);
  [[noreturn]] void fail(const std::string& why);
  bool peer_gone(int peer) const;

  std::string path_;
  int fd_ = -1;  // rank 0 until close_for_peers()
  int rank_ = 0;
  int first_rank_ = 0;
  int world_ = 1;
  size_t slot_bytes_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t arrivals_ = 0;
  std::atomic<bool> aborted_here_{false};  // abort() may come from another thread than the waits
  struct Peer {
    int32_t pid = 0;
    uint64_t start_time = 0;
    bool checkable = false;  // its pid names the same process here (same pid namespace)
  };
  std::unique_ptr<Peer[]> peers_;
};

}  // namespace ddp
