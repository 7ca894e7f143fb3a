// ShmAllreduceBackend (all-reduces through a ShmSegment on a worker thread, the rest forwarded to Gloo) and its setup.
#include "distributed/shm/shm_allreduce.h"

#include "base/first_line.h"
#include "base/thread_name.h"
#include "distributed/forwarding_backend.h"
#include "distributed/shm/shm_segment.h"
#include "distributed/store_notice.h"

#include <ATen/Dispatch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <regex>
#include <thread>

namespace ddp {
namespace {

using c10d::ReduceOp;

// out[i] (and out2[i] unless null) = ((in[0][i] op in[1][i]) op in[2][i]) ..., in rank order. `out` may be one of
// the inputs: each block is read in full before it is written.
template <typename T, typename Op>
void reduce_ranks(T* out, T* out2, const std::vector<const T*>& in, size_t n, Op op) {
  constexpr size_t kBlock = 2048;
  T acc[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t m = std::min(kBlock, n - at);
    const T* a = in[0] + at;
    const T* b = in[1] + at;
    for (size_t i = 0; i < m; ++i) acc[i] = op(a[i], b[i]);
    for (size_t k = 2; k < in.size(); ++k) {
      const T* c = in[k] + at;
      for (size_t i = 0; i < m; ++i) acc[i] = op(acc[i], c[i]);
    }
    std::memcpy(out + at, acc, m * sizeof(T));
    if (out2) std::memcpy(out2 + at, acc, m * sizeof(T));
  }
}

// Gloo's reductions (gloo/math.h): sum, product, std::min, std::max.
template <typename T>
void reduce_ranks(T* out, T* out2, const std::vector<const T*>& in, size_t n, ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM:
      return reduce_ranks(out, out2, in, n, [](T x, T y) -> T { return x + y; });
    case ReduceOp::PRODUCT:
      return reduce_ranks(out, out2, in, n, [](T x, T y) -> T { return x * y; });
    case ReduceOp::MIN:
      return reduce_ranks(out, out2, in, n, [](T x, T y) -> T { return std::min(x, y); });
    case ReduceOp::MAX:
      return reduce_ranks(out, out2, in, n, [](T x, T y) -> T { return std::max(x, y); });
    default:
      throw std::logic_error("shared-memory all-reduce: unsupported reduction");
  }
}

bool supported(ReduceOp::RedOpType op) {
  return op == ReduceOp::SUM || op == ReduceOp::PRODUCT || op == ReduceOp::MIN || op == ReduceOp::MAX;
}

bool supported(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
      return true;
    default:
      return false;
  }
}

// The Work of one queued all-reduce: wait() rethrows the all-reduce's error.
class ShmWork : public c10d::Work {
 public:
  explicit ShmWork(c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(-1, c10d::OpType::ALLREDUCE), future_(std::move(future)) {}
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override { return future_->exception_ptr(); }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
  bool wait(std::chrono::milliseconds /*timeout: the segment's waits have dist.timeout_s*/) override {
    future_->waitAndThrow();
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Flat: the segment joins every rank of the job. Hierarchical: it joins the ranks of one node, and the node's first
// rank (segment rank 0) also holds `across`, a group of one rank per node: an all-reduce is reduced within the node,
// all-reduced across nodes by that rank, and its result copied back to the node's other ranks.
class ShmAllreduceBackend : public ForwardingBackend {
 public:
  ShmAllreduceBackend(c10::intrusive_ptr<c10d::Backend> inner, std::unique_ptr<ShmSegment> segment,
                      std::chrono::milliseconds timeout, bool hierarchical = false,
                      c10::intrusive_ptr<c10d::Backend> across = {})
      : ForwardingBackend(std::move(inner)),
        segment_(std::move(segment)),
        timeout_(timeout),
        hierarchical_(hierarchical),
        across_(std::move(across)),
        worker_([this] { work(); }) {}

  // Queued all-reduces get 2 s to finish (at a normal end there are none); after that this rank gives up, so
  // a rank leaving on an error neither waits out dist.timeout_s nor leaves its peers waiting for it.
  ~ShmAllreduceBackend() override {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
    if (!done_.wait_for(lock, std::chrono::seconds(2), [&] { return worker_done_; })) segment_->abort();
    lock.unlock();
    worker_.join();
  }

  const std::string getBackendName() const override { return hierarchical_ ? "gloo+shm+nodes" : "gloo+shm"; }

  // ProcessGroup::shutdown reaches the group between nodes too (its Gloo threads end here, with the job's group's).
  void shutdown() override {
    if (across_) across_->shutdown();
    inner_->shutdown();
  }

  // A small all-reduce finds the worker idle most of the time (the stop vote, a bucket of a small model at the end of
  // backward): it then runs on the calling thread, which saves the worker's wake-up and the caller's, two context
  // switches on each rank. Anything else waits its turn on the worker, so every rank runs them in issue order.
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    if (tensors.size() != 1 || !eligible(tensors[0], opts.reduceOp)) return inner_->allreduce(tensors, opts);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    started_.fetch_add(1, std::memory_order_relaxed);
    Pending p{tensors[0], opts.reduceOp.op_, future};
    bool here = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      here = small(p.tensor) && queue_.empty() && !running_;
      if (here) {
        running_ = true;
      } else {
        queue_.push_back(std::move(p));
        last_ = future;
      }
    }
    if (!here) {
      wake_.notify_one();
      return c10::make_intrusive<ShmWork>(future);
    }
    run_or_fail(p, kCallerSpin);
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      queued = !queue_.empty() || stopping_;
    }
    if (queued) wake_.notify_one();  // a waiting worker woken for nothing would cost a context switch
    return c10::make_intrusive<ShmWork>(future);
  }

  // Gloo's count of the collectives it started, and these all-reduces.
  uint64_t getSequenceNumberForGroup() override {
    return inner_->getSequenceNumberForGroup() + started_.load(std::memory_order_relaxed);
  }

  // A barrier also waits for the all-reduces issued before it, as Gloo's does.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    c10::intrusive_ptr<c10::ivalue::Future> last;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last = last_;
    }
    if (last) {
      last->wait();
      if (last->hasError()) std::rethrow_exception(last->exception_ptr());
    }
    return inner_->barrier(o);
  }

 private:
  struct Pending {
    at::Tensor tensor;
    ReduceOp::RedOpType op;
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };

  // Every rank makes the same call with the same shapes and dtypes, so every rank decides the same way. Between
  // nodes Gloo reduces no int16 (ProcessGroupGloo's GENERATE_ALL_TYPES): the hierarchical path hands such an
  // all-reduce to Gloo whole, which refuses it in its own words, where the node path's failure between nodes would
  // read as a lost node.
  bool eligible(const at::Tensor& t, const ReduceOp& op) const {
    if (hierarchical_ && t.scalar_type() == at::kShort) return false;
    return t.device().is_cpu() && t.layout() == at::kStrided && t.is_contiguous() && supported(t.scalar_type()) &&
           supported(op.op_);
  }

  // Up to this many bytes an all-reduce is small: every rank copies all of it into its slot and reduces all of it
  // itself, behind one barrier instead of two (each rank makes the same choice: the sizes are the same).
  static constexpr size_t kSmallBytes = 256u << 10;
  // A caller waits for a peer's training thread, which is on a core of its own: spinning this long before sleeping
  // catches it without a context switch. The worker does not spin: it shares a core with a training thread.
  static constexpr std::chrono::microseconds kCallerSpin{50};

  bool small(const at::Tensor& t) const { return t.nbytes() <= std::min(kSmallBytes, segment_->slot_bytes()); }

  void work() {
    name_this_thread("ddp-allreduce");
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
        if (queue_.empty()) {
          worker_done_ = true;
          done_.notify_all();
          return;
        }
        p = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      run_or_fail(p, std::chrono::microseconds(0));
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
  }

  // Runs one all-reduce (the thread that set running_ only) and completes its future.
  void run_or_fail(Pending& p, std::chrono::microseconds spin) {
    if (broken_) {
      p.future->setError(broken_);
      return;
    }
    try {
      run(p.tensor, p.op, spin);
    } catch (...) {
      broken_ = std::current_exception();
      segment_->abort();
      p.future->setError(broken_);
      return;
    }
    p.future->markCompleted(c10::IValue(std::vector<at::Tensor>{p.tensor}));
  }

  // One all-reduce: within the segment's ranks; hierarchical, in chunks of one slot: each chunk is reduced within the
  // node and its all-reduce between nodes issued at once (by the node's first rank), so that the link carries one
  // chunk while the node reduces the next; then each chunk is copied back from the node's first rank as soon as its
  // all-reduce is done, while the later ones are still on the link. Every rank of the node runs the same sequence of
  // pieces (every chunk reduced, then every chunk copied back), whatever the link does. The link, the step's slowest
  // part between nodes, thus waits only for a bucket's first chunk, not for the whole bucket's reduction and copy.
  void run(at::Tensor& t, ReduceOp::RedOpType op, std::chrono::microseconds spin) {
    if (!hierarchical_) {
      reduce_within(t, op, spin, /*keep_result=*/true);
      return;
    }
    const bool first = segment_->rank() == 0;
    const at::Tensor flat = t.view(-1);
    const int64_t n = flat.numel();
    const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(segment_->slot_bytes()) / flat.element_size());
    std::vector<at::Tensor> chunks;
    for (int64_t at = 0; at < n || chunks.empty(); at += per_chunk)
      chunks.push_back(flat.narrow(0, at, std::min(per_chunk, n - at)));
    // An all-reduce between nodes that fails: this node's other ranks leave once this one gives up, and the cause is
    // another node, said so here. The chunks still in flight are left to Gloo, whose works hold their tensors.
    auto between_nodes = [](auto&& call) {
      try {
        return call();
      } catch (const std::exception& e) {
        throw std::runtime_error(std::string(kBetweenNodesFailed) + first_line(e.what()));
      }
    };
    std::vector<c10::intrusive_ptr<c10d::Work>> across;
    c10d::AllreduceOptions o;
    o.reduceOp = ReduceOp(op);
    for (at::Tensor& chunk : chunks) {
      reduce_within(chunk, op, spin, /*keep_result=*/first);
      std::vector<at::Tensor> tensors{chunk};
      if (across_) across.push_back(between_nodes([&] { return across_->allreduce(tensors, o); }));
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (across_) between_nodes([&] { return across[i]->wait(); });
      copy_from_first(chunks[i], spin);
    }
  }

  // The reduction within the segment's ranks, in pieces of up to slot_bytes. A piece is cut into one share per rank.
  // Each rank copies the shares the other ranks reduce into its slot, barrier, reduces its own share across every
  // rank (its own values read from its tensor, the others' from their slots) into its tensor and its slot, barrier,
  // copies the other ranks' reduced shares out of their slots (unless !keep_result: a rank whose tensor is
  // overwritten next). Its own share never goes through the segment on the way in. Pieces alternate between two
  // buffers, and every piece of every phase has a barrier between its writes and its reads, so a piece's slots are
  // rewritten only after every rank passed the next piece's first barrier, which it reaches only after it read this
  // piece.
  void reduce_within(at::Tensor& t, ReduceOp::RedOpType op, std::chrono::microseconds spin, bool keep_result) {
    const int world = segment_->world();
    const int rank = segment_->rank();
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "shm_allreduce", [&] {
      scalar_t* data = t.data_ptr<scalar_t>();
      const size_t n = static_cast<size_t>(t.numel());
      if (small(t)) {
        // Its slots are rewritten two pieces later, after every rank passed the next piece's barrier, which it
        // reaches only after reducing this one.
        const int buffer = static_cast<int>(pieces_++ & 1);
        std::memcpy(segment_->slot(buffer, rank), data, n * sizeof(scalar_t));
        segment_->barrier(timeout_, spin);
        std::vector<const scalar_t*> in(static_cast<size_t>(world));
        for (int r = 0; r < world; ++r)
          in[static_cast<size_t>(r)] = r == rank ? data : reinterpret_cast<const scalar_t*>(segment_->slot(buffer, r));
        reduce_ranks<scalar_t>(data, nullptr, in, n, op);
        return;
      }
      const size_t per_piece = segment_->slot_bytes() / sizeof(scalar_t);
      std::vector<const scalar_t*> in(static_cast<size_t>(world));
      for (size_t off = 0; off < n; off += per_piece) {
        const size_t m = std::min(per_piece, n - off);
        const int buffer = static_cast<int>(pieces_++ & 1);
        auto slot = [&](int r) { return reinterpret_cast<scalar_t*>(segment_->slot(buffer, r)); };
        // Shares of 16-element multiples (whole cache lines for 4-byte types).
        const size_t share = ((m + world - 1) / world + 15) & ~size_t{15};
        auto lo = [&](int r) { return std::min(static_cast<size_t>(r) * share, m); };
        auto hi = [&](int r) { return std::min(lo(r) + share, m); };
        scalar_t* piece = data + off;
        for (int r = 0; r < world; ++r)
          if (r != rank) std::memcpy(slot(rank) + lo(r), piece + lo(r), (hi(r) - lo(r)) * sizeof(scalar_t));
        segment_->barrier(timeout_, spin);
        for (int r = 0; r < world; ++r) in[static_cast<size_t>(r)] = (r == rank ? piece : slot(r)) + lo(rank);
        reduce_ranks(slot(rank) + lo(rank), piece + lo(rank), in, hi(rank) - lo(rank), op);
        segment_->barrier(timeout_, spin);
        if (!keep_result) continue;
        for (int r = 0; r < world; ++r)
          if (r != rank) std::memcpy(piece + lo(r), slot(r) + lo(r), (hi(r) - lo(r)) * sizeof(scalar_t));
      }
    });
  }

  // The segment's rank 0 copies `t` to the other ranks, in pieces through its slot, so every rank of the node holds
  // its bits.
  void copy_from_first(at::Tensor& t, std::chrono::microseconds spin) {
    char* data = static_cast<char*>(t.data_ptr());
    const size_t bytes = t.nbytes();
    const bool first = segment_->rank() == 0;
    for (size_t off = 0; off < bytes; off += segment_->slot_bytes()) {
      const size_t m = std::min(segment_->slot_bytes(), bytes - off);
      char* slot = segment_->slot(static_cast<int>(pieces_++ & 1), 0);
      if (first) std::memcpy(slot, data + off, m);
      segment_->barrier(timeout_, spin);
      if (!first) std::memcpy(data + off, slot, m);
    }
  }

  std::unique_ptr<ShmSegment> segment_;
  std::chrono::milliseconds timeout_;
  const bool hierarchical_;
  const c10::intrusive_ptr<c10d::Backend> across_;  // hierarchical, the node's first rank: one rank per node
  uint64_t pieces_ = 0;                             // the running thread only (running_)
  std::exception_ptr broken_;  // the running thread only: after a failure every later all-reduce fails too
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<Pending> queue_;
  std::atomic<uint64_t> started_{0};  // all-reduces taken on here
  c10::intrusive_ptr<c10::ivalue::Future> last_;
  bool running_ = false;  // an all-reduce is running, on the worker or on a caller
  bool stopping_ = false;
  bool worker_done_ = false;
  std::thread worker_;  // last: starts once everything above exists
};

}  // namespace

namespace {

void set_text(c10d::Store& store, const std::string& key, const std::string& text) {
  store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string get_text(c10d::Store& store, const std::string& key) {
  const auto got = store.get(key);
  return std::string(got.begin(), got.end());
}

// Collective over the `world` ranks that share `key`: their rank 0 creates a segment, the others open it through
// `proc_dir`. Returns it, or null with `error` saying why ("rank 1: cannot open ...", ranks numbered `name_base` +
// rank); rank 0 tells every other rank when it could not make one.
std::unique_ptr<ShmSegment> join_segment(c10d::Store& store, const std::string& key, int rank, int world, int name_base,
                                         const ShmAllreduceOptions& options, std::string& error) {
  auto named = [&](int r, const std::string& what) { return "rank " + std::to_string(name_base + r) + ": " + what; };
  std::unique_ptr<ShmSegment> segment;
  if (rank == 0) {
    std::string posted;
    try {
      segment = ShmSegment::create(options.dir, world, options.slot_bytes);
      const std::string& path = segment->path();  // /proc/PID/fd/FD
      posted = path.substr(std::string("/proc/").size()) + "\n" + std::to_string(segment->token());
    } catch (const std::exception& e) {
      error = named(0, first_line(e.what()));
      posted = "!" + error;
    }
    set_text(store, key + "segment", posted);
    return segment;
  }
  const std::string posted = get_text(store, key + "segment");
  if (!posted.empty() && posted[0] == '!') {
    error = posted.substr(1);
    return segment;
  }
  try {
    // "PID/fd/FD\nTOKEN", nothing else: the path must not lead anywhere but to a process's fd.
    static const std::regex kPosted("[0-9]{1,10}/fd/[0-9]{1,10}\n[0-9]{1,20}");
    if (posted.size() > 64 || !std::regex_match(posted, kPosted))
      throw std::runtime_error("rank 0's segment announcement is malformed");
    const auto nl = posted.find('\n');
    segment = ShmSegment::open(options.proc_dir + "/" + posted.substr(0, nl), std::stoull(posted.substr(nl + 1)), rank,
                               world);
  } catch (const std::exception& e) {
    error = named(rank, first_line(e.what()));
  }
  return segment;
}

// Collective over the job's ranks: each posts `error` ("" = it can); rank 0 reads them in rank order and posts the
// verdict, the first rank's error ("" when every rank can), which every rank returns, so that every rank decides the
// same. Two store requests per rank (three to read a refusal), and `world` more for rank 0. With `wait_for_readers`,
// rank 0 returns a refusal only once every rank has read it (or its deadline passed): its process serves the store,
// and the refusal ends the job, so its exit would take the verdict along before a slower rank read it.
std::string agree(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, int rank, int world,
                  const std::string& error, bool wait_for_readers) {
  set_text(*store, key + "answer/" + std::to_string(rank), "=" + error);
  if (rank == 0) {
    std::string verdict = "=";
    for (int r = 0; r < world && verdict == "="; ++r) verdict = get_text(*store, key + "answer/" + std::to_string(r));
    post_notice(store, key + "verdict", verdict, world, wait_for_readers && verdict != "=", kReadersWaitInTheStore);
    return verdict.substr(1);
  }
  const std::string verdict = get_text(*store, key + "verdict");
  if (verdict != "=") count_notice_read(*store, key + "verdict");
  return verdict.substr(1);
}

// Collective over the job's ranks: rank 0 posts its LOCAL_WORLD_SIZE, each rank compares its own with it, and they
// agree; returns "" when every rank's is the same, else the same sentence on every rank, naming the first rank whose
// size is not rank 0's. The agreement after it carries its refusal to the end, so rank 0 need not wait here.
std::string same_node_size(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, int rank, int world,
                           int local_world) {
  const std::string mine = std::to_string(local_world);
  if (rank == 0) set_text(*store, key + "first", mine);
  const std::string first = get_text(*store, key + "first");
  return agree(store, key, rank, world,
               mine == first ? ""
                             : "rank " + std::to_string(rank) + ": LOCAL_WORLD_SIZE " + mine + ", rank 0's is " +
                                   first + ": it needs nodes of the same number of ranks",
               /*wait_for_readers=*/false);
}

}  // namespace

ShmAllreduceSetup wrap_with_shm_allreduce(const c10::intrusive_ptr<c10d::Backend>& inner,
                                          const c10::intrusive_ptr<c10d::Store>& store,
                                          const ShmAllreduceOptions& options) {
  const int rank = inner->getRank();
  const int world = inner->getSize();
  const std::string key = "ddptrain/shm_allreduce/";
  std::string error;
  auto segment = join_segment(*store, key, rank, world, 0, options, error);
  const std::string reason = agree(store, key, rank, world, error, options.wait_for_readers_of_refusal);
  if (rank == 0 && segment) segment->close_for_peers();
  if (!reason.empty()) return {inner, false, reason};
  segment->learn_peers();
  auto backend = c10::make_intrusive<ShmAllreduceBackend>(inner, std::move(segment), options.timeout);
  return {backend, true, ""};
}

ShmAllreduceSetup wrap_with_hierarchical_allreduce(const c10::intrusive_ptr<c10d::Backend>& inner,
                                                   const c10::intrusive_ptr<c10d::Store>& store,
                                                   const ShmAllreduceOptions& options, const NodePlace& place,
                                                   const AcrossNodes& across) {
  const int rank = inner->getRank();
  const int world = inner->getSize();
  const std::string key = "ddptrain/hierarchical_allreduce/";
  // Each rank's own numbers may fit a layout that the others' do not: the node sizes are compared first, so that
  // no two nodes' ranks ever join one segment (or lead one node) on their own numbers.
  std::string error = same_node_size(store, key + "local_world/", rank, world, place.local_world);
  std::unique_ptr<ShmSegment> segment;
  if (!error.empty()) {
    // The same on every rank; agree below passes it on.
  } else if (place.nodes < 2 || place.local_world < 2 || place.nodes * place.local_world != world ||
             rank != place.node * place.local_world + place.local_rank) {
    error =
        "rank " + std::to_string(rank) + ": it needs several nodes of several ranks each, numbered node by " +
        "node (RANK = node * LOCAL_WORLD_SIZE + LOCAL_RANK); this job has " +
        (place.nodes > 0 ? std::to_string(place.nodes) + " node(s) of " + std::to_string(place.local_world) + " rank(s)"
                         : "nodes of different sizes") +
        " in a world of " + std::to_string(world);
  } else {
    segment = join_segment(*store, key + "node/" + std::to_string(place.node) + "/", place.local_rank,
                           place.local_world, place.node * place.local_world, options, error);
  }
  const std::string reason = agree(store, key, rank, world, error, options.wait_for_readers_of_refusal);
  if (place.local_rank == 0 && segment) segment->close_for_peers();
  if (!reason.empty()) return {inner, false, reason};
  segment->learn_peers();
  segment->name_ranks_from(place.node * place.local_world);
  c10::intrusive_ptr<c10d::Backend> leaders;
  if (place.local_rank == 0)
    leaders = across(c10::make_intrusive<c10d::PrefixStore>(key + "across/", store), place.node, place.nodes);
  auto backend = c10::make_intrusive<ShmAllreduceBackend>(inner, std::move(segment), options.timeout,
                                                          /*hierarchical=*/true, leaders);
  return {backend, true, ""};
}

}  // namespace ddp
