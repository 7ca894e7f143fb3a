// ShmSegment: a shared-memory file mapped by every rank of one host, with per-rank data slots and a barrier.
//
// Layout: a header (magic, token, world, slot size, abort word, one cache line per rank: barrier counter, pid,
// process start time), then two buffers of `world` slots of `slot_bytes` each. The barrier is a counter per
// rank waited on with futexes; a wait gives up when the abort word is set, the peer's process is gone, or the
// timeout passes, and throws naming that rank.
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
  // Rank 0: makes DIR/ddptrain-allreduce-<random> (0600), sized and allocated up front (a full tmpfs fails here,
  // not later with SIGBUS), with a fresh random token.
  static std::unique_ptr<ShmSegment> create(const std::string& dir, int world, size_t slot_bytes);
  // Other ranks: maps `path` (rank 0's file name in this rank's dir) and checks the magic, `token` and world size.
  static std::unique_ptr<ShmSegment> open(const std::string& path, uint64_t token, int rank, int world);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  const std::string& path() const { return path_; }
  uint64_t token() const;
  size_t slot_bytes() const { return slot_bytes_; }
  int world() const { return world_; }
  int rank() const { return rank_; }

  // Removes the file (rank 0, once every rank has mapped it); the mappings stay valid.
  void unlink();
  // Reads every peer's pid and start time (written at create/open) so waits can tell a dead peer.
  void learn_peers();

  // Slot `rank` of buffer `buffer` (0 or 1).
  char* slot(int buffer, int rank) const;

  // Every rank arrives, then waits for all others to arrive at the same count.
  void barrier(std::chrono::milliseconds timeout);
  // Marks the segment broken (others' waits then fail naming this rank) and makes this rank's waits fail within
  // 20 ms. Callable from any thread.
  void abort();

 private:
  ShmSegment() = default;
  void map(int fd, size_t bytes);
  void wait_for(int peer, uint32_t target, std::chrono::milliseconds timeout);
  [[noreturn]] void fail(const std::string& why);
  bool peer_gone(int peer) const;

  std::string path_;
  int rank_ = 0;
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
