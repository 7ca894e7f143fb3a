// Activity's phases and their names; PhaseScope.
#include "distributed/activity.h"

#include <utility>

namespace ddp {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kSetup:
      return "setup";
    case Phase::kLoop:
      return "training loop";
    case Phase::kData:
      return "data";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kGradientAllReduce:
      return "gradient all-reduce";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kCollective:
      return "collective";
    case Phase::kEval:
      return "eval";
    case Phase::kCheckpoint:
      return "checkpoint";
    case Phase::kFinish:
      return "finish";
  }
  return "?";
}

bool waits_for_peers(Phase p) { return p == Phase::kGradientAllReduce || p == Phase::kCollective; }

Activity::Activity(std::function<uint64_t()> collectives_issued)
    : collectives_issued_(std::move(collectives_issued)), since_ns_(now_ns()) {}

void Activity::enter(Phase p) {
  if (collectives_issued_) collectives_.store(collectives_issued_(), std::memory_order_relaxed);
  since_ns_.store(now_ns(), std::memory_order_relaxed);
  phase_.store(static_cast<int>(p), std::memory_order_release);
}

Activity::Snapshot Activity::snapshot() const {
  Snapshot s;
  s.phase = static_cast<Phase>(phase_.load(std::memory_order_acquire));
  s.step = step_.load(std::memory_order_relaxed);
  s.seconds = static_cast<double>(now_ns() - since_ns_.load(std::memory_order_relaxed)) / 1e9;
  s.collectives = collectives_.load(std::memory_order_relaxed);
  s.buckets = buckets_.load(std::memory_order_relaxed);
  return s;
}

PhaseScope::PhaseScope(Activity& activity, Phase phase, const char* range_name)
    : activity_(activity), before_(activity.phase()) {
  if (range_name && range_.isActive()) range_.before(range_name);
  activity_.enter(phase);
}

PhaseScope::~PhaseScope() { activity_.enter(before_); }

}  // namespace ddp
