// ShmSegment: creating, mapping and checking the shared file; the futex barrier and its failure paths.
#include "distributed/shm/shm_segment.h"

#include "distributed/proc_stat.h"
#include "base/seconds_text.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace {

constexpr uint64_t kSegmentMagic = 0x324d485354504444ull;  // "DDPTSHM2" (a rank cell with its sleepers)
constexpr size_t kLine = 64;
constexpr size_t kSegmentPage = 4096;

struct alignas(kLine) RankCell {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> sleepers;  // peers asleep on `arrived`: only then does an arrival need a futex wake
  int32_t pid;
  uint64_t start_time;
};
static_assert(sizeof(RankCell) == kLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  uint64_t token;
  uint32_t world;
  uint32_t pad;
  uint64_t slot_bytes;
  std::atomic<uint32_t> abort;  // 0, or 1 + the rank that gave up
};

size_t round_up_to(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t data_offset(int world) {
  return round_up_to(sizeof(SegmentHeader) + kLine * static_cast<size_t>(world), kSegmentPage);
}
size_t segment_bytes(int world, size_t slot_bytes) {
  return data_offset(world) + 2 * static_cast<size_t>(world) * slot_bytes;
}

std::string errno_text(int e) { return std::strerror(e); }

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Sleeps while *word == expected, at most `ns` nanoseconds (or until woken).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long ns) {
  timespec ts{ns / 1000000000L, ns % 1000000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

static SegmentHeader* segment_header(void* base) { return static_cast<SegmentHeader*>(base); }
static RankCell* cell_of(void* base, int rank) {
  return reinterpret_cast<RankCell*>(static_cast<char*>(base) + sizeof(SegmentHeader) +
                                     kLine * static_cast<size_t>(rank));
}

void ShmSegment::map(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path_ + ": " + errno_text(e));
  base_ = p;
  bytes_ = bytes;
  peers_ = std::make_unique<Peer[]>(static_cast<size_t>(world_));
}

void ShmSegment::register_self() {
  RankCell* me = cell_of(base_, rank_);
  me->pid = static_cast<int32_t>(getpid());
  me->start_time = process_start_time(me->pid);
}

std::unique_ptr<ShmSegment> ShmSegment::create(const std::string& dir, int world, size_t slot_bytes) {
  std::unique_ptr<ShmSegment> s(new ShmSegment());
  s->rank_ = 0;
  s->world_ = world;
  s->slot_bytes_ = round_up_to(slot_bytes, kLine);
  std::random_device rd;
  const uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  s->fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (s->fd_ < 0) throw std::runtime_error("cannot create an unnamed file in " + dir + "/: " + errno_text(errno));
  s->path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(s->fd_);
  const size_t bytes = segment_bytes(world, s->slot_bytes_);
  if (int e = posix_fallocate(s->fd_, 0, static_cast<off_t>(bytes)); e != 0)
    throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes in " + dir + "/: " + errno_text(e));
  s->map(s->fd_, bytes);
  s->register_self();
  SegmentHeader* h = segment_header(s->base_);
  h->token = token;
  h->world = static_cast<uint32_t>(world);
  h->slot_bytes = s->slot_bytes_;
  h->abort.store(0);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  return s;
}

std::unique_ptr<ShmSegment> ShmSegment::open(const std::string& path, uint64_t token, int rank, int world) {
  std::unique_ptr<ShmSegment> s(new ShmSegment());
  s->path_ = path;
  s->rank_ = rank;
  s->world_ = world;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + errno_text(errno) + " (not on rank 0's host?)");
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < data_offset(world)) {
    ::close(fd);
    throw std::runtime_error(path + " is smaller than its header");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  try {
    s->map(fd, bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  const SegmentHeader* h = segment_header(s->base_);
  if (h->magic != kSegmentMagic || h->token != token)
    throw std::runtime_error(path + " is not rank 0's segment (token differs: another host's file of that name?)");
  if (h->world != static_cast<uint32_t>(world))
    throw std::runtime_error(path + " was made for a world of " + std::to_string(h->world));
  s->slot_bytes_ = h->slot_bytes;
  if (segment_bytes(world, s->slot_bytes_) != bytes) throw std::runtime_error(path + " has the wrong size");
  s->register_self();  // only now: nothing is written into a file that is not rank 0's segment
  return s;
}

ShmSegment::~ShmSegment() {
  if (base_) munmap(base_, bytes_);
  close_for_peers();
}

uint64_t ShmSegment::token() const { return segment_header(base_)->token; }

void ShmSegment::close_for_peers() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ShmSegment::learn_peers() {
  for (int j = 0; j < world_; ++j) {
    const RankCell* c = cell_of(base_, j);
    Peer& p = peers_[static_cast<size_t>(j)];
    p.pid = c->pid;
    p.start_time = c->start_time;
    // A peer in another pid namespace has a pid that names nothing here, or another process.
    p.checkable = j != rank_ && p.pid > 0 && p.start_time != 0 && process_start_time(p.pid) == p.start_time;
  }
}

char* ShmSegment::slot(int buffer, int rank) const {
  return static_cast<char*>(base_) + data_offset(world_) +
         (static_cast<size_t>(buffer) * static_cast<size_t>(world_) + static_cast<size_t>(rank)) * slot_bytes_;
}

bool ShmSegment::peer_gone(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.checkable) return false;
  char state = '?';
  const uint64_t start = process_start_time(p.pid, &state);
  return start != p.start_time || state == 'Z' || state == 'X';
}

void ShmSegment::fail(const std::string& why) {
  abort();
  throw std::runtime_error("shared-memory all-reduce: " + why);
}

void ShmSegment::abort() {
  aborted_here_ = true;
  uint32_t none = 0;
  segment_header(base_)->abort.compare_exchange_strong(none, static_cast<uint32_t>(rank_ + 1));
}

void ShmSegment::barrier(std::chrono::milliseconds timeout, std::chrono::microseconds spin) {
  const uint32_t target = ++arrivals_;
  RankCell* me = cell_of(base_, rank_);
  // Sequentially consistent with the sleepers' count (a sleeper counts itself, then re-reads `arrived` in the
  // kernel's futex wait): either the arrival sees the sleeper, or the sleeper sees the arrival.
  me->arrived.store(target, std::memory_order_seq_cst);
  if (me->sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(&me->arrived);
  for (int j = 0; j < world_; ++j)
    if (j != rank_) wait_for(j, target, timeout, spin);
  // A peer that arrived and then gave up (its wait for another rank timed out) has not done its part after the
  // barrier: every rank learns it here, not only those still waiting.
  if (uint32_t who = segment_header(base_)->abort.load(std::memory_order_acquire); who != 0) {
    if (aborted_here_) throw std::runtime_error("shared-memory all-reduce: aborted on this rank");
    fail("rank " + std::to_string(first_rank_ + static_cast<int>(who) - 1) + " gave up (see its error)");
  }
}

void ShmSegment::wait_for(int peer, uint32_t target, std::chrono::milliseconds timeout,
                          std::chrono::microseconds spin) {
  constexpr int kSpins = 256;
  constexpr long kNap = 20'000'000;  // 20 ms: how soon an abort or a dead peer is noticed
  RankCell* cell = cell_of(base_, peer);
  std::atomic<uint32_t>& word = cell->arrived;
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = start + spin;
  bool spinning = spin.count() > 0;
  auto next_check = start + std::chrono::milliseconds(100);
  for (int spins = 0;; ++spins) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (static_cast<int32_t>(seen - target) >= 0) return;
    if (spins < kSpins) {
      cpu_relax();
      continue;
    }
    if (spinning) {
      if ((spins & 63) != 0 || std::chrono::steady_clock::now() < spin_until) {
        cpu_relax();
        continue;
      }
      spinning = false;
    }
    if (aborted_here_) throw std::runtime_error("shared-memory all-reduce: aborted on this rank");
    if (uint32_t who = segment_header(base_)->abort.load(std::memory_order_acquire); who != 0)
      fail("rank " + std::to_string(first_rank_ + static_cast<int>(who) - 1) + " gave up (see its error)");
    cell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    futex_wait(&word, seen, kNap);
    cell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_check) {
      if (peer_gone(peer))
        fail("rank " + std::to_string(first_rank_ + peer) + " (pid " +
             std::to_string(peers_[static_cast<size_t>(peer)].pid) + ") exited during an all-reduce");
      next_check = now + std::chrono::milliseconds(100);
    }
    if (now - start >= timeout)
      fail("rank " + std::to_string(first_rank_ + peer) + " did not reach the all-reduce within dist.timeout_s = " +
           seconds_text(timeout) + " s (a peer is stuck or too slow)");
  }
}

}  // namespace ddp
