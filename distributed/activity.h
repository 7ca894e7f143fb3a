// Activity: what this rank is doing now (step, phase, since when, collectives issued), written by the training thread
// and read by the hang watch; PhaseScope marks a phase for it and as a range in profiler traces.
#pragma once

#include <ATen/record_function.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace ddp {

enum class Phase : int {
  kSetup,
  kLoop,               // the training loop between the phases below: logging, checkpoint decisions
  kData,               // waiting for the next batch
  kForward,            // with the loss
  kBackward,           // computing gradients
  kGradientAllReduce,  // backward's end, waiting for DDP's gradient all-reduce
  kOptimizer,          // unscale, norm, step, EMA
  kCollective,         // another collective: the metrics' sums, the stop vote
  kEval,
  kCheckpoint,
  kFinish,  // after the last step: final evaluation, model.pt
};

// "data", "gradient all-reduce", ...
const char* phase_name(Phase p);
// Whether a rank long in this phase waits for its peers (what the hang watch reports on).
bool waits_for_peers(Phase p);

class Activity {
 public:
  struct Snapshot {
    int64_t step = 0;  // optimizer steps done
    Phase phase = Phase::kSetup;
    double seconds = 0;        // in this phase so far
    uint64_t collectives = 0;  // issued by this rank when it entered the phase
    int64_t buckets = 0;       // DDP's gradient buckets, each one collective (0: no DDP)
  };

  // collectives_issued: how many collectives this rank has issued so far (read when a phase is entered).
  explicit Activity(std::function<uint64_t()> collectives_issued = {});

  void enter(Phase p);
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  void set_gradient_buckets(int64_t n) { buckets_.store(n, std::memory_order_relaxed); }
  Phase phase() const { return static_cast<Phase>(phase_.load(std::memory_order_relaxed)); }
  Snapshot snapshot() const;

 private:
  std::function<uint64_t()> collectives_issued_;
  std::atomic<int64_t> step_{0};
  std::atomic<int> phase_{static_cast<int>(Phase::kSetup)};
  std::atomic<int64_t> since_ns_;
  std::atomic<uint64_t> collectives_{0};
  std::atomic<int64_t> buckets_{0};
};

// Enters `phase` for the scope's life (then the phase before it again); with a range_name, marks the scope as that
// record_function range in profile.steps' traces (free outside the traced steps).
class PhaseScope {
 public:
  PhaseScope(Activity& activity, Phase phase, const char* range_name = nullptr);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Activity& activity_;
  Phase before_;
  at::RecordFunction range_{at::RecordScope::USER_SCOPE};
};

}  // namespace ddp
