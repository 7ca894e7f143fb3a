// PhaseTimes: where a rank's training time goes (data wait, forward+backward, gradient all-reduce wait, optimizer),
// and the straggler: the rank whose own work holds the others back in a log interval.
#pragma once

#include "base/seconds_text.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// Seconds in each phase of training steps.
struct PhaseTimes {
  double data = 0;       // waiting for the next batch
  double compute = 0;    // forward and backward, less the wait for the gradient all-reduce
  double comm = 0;       // backward's end waiting for the gradient all-reduce (not overlapped with compute)
  double optimizer = 0;  // unscale, norm, clip, step, EMA

  static constexpr std::array<const char*, 4> kNames = {"data", "compute", "comm", "optimizer"};
  static PhaseTimes from(const std::array<double, 4>& v) { return {v[0], v[1], v[2], v[3]}; }
  std::array<double, 4> values() const { return {data, compute, comm, optimizer}; }
  // A rank's own work: all but waiting for the others in the all-reduce.
  double work() const { return data + compute + optimizer; }
  PhaseTimes& operator+=(const PhaseTimes& o);
  PhaseTimes operator/(double d) const;
};

// One rank's figures of a log interval: seconds per step in each phase, and its peak RSS so far.
struct RankInterval {
  PhaseTimes time;
  double rss_peak_mib = 0;
};

// The interval's figures of every rank travel in the sum the Reporter all-reduces anyway: each rank fills its own
// slots of a vector of world_size * kRankSlots zeros.
inline constexpr size_t kRankSlots = 5;
std::vector<double> rank_slots(const RankInterval& mine, int64_t rank, int64_t world_size);
// Back from the summed slots (world_size * kRankSlots values), by rank.
std::vector<RankInterval> from_rank_slots(const double* summed, int64_t world_size);

PhaseTimes mean_over_ranks(const std::vector<RankInterval>& ranks);

// The rank that did the most work in an interval, against the median rank (the lower median: a real rank).
struct Straggler {
  int64_t rank = -1;
  std::string phase;    // the phase (data, compute, optimizer) in which it exceeds the median rank most
  double excess_s = 0;  // its work less the median rank's, in the unit of the input (seconds per step)
  double ratio = 1;     // its work / the median rank's
};

// nullopt for fewer than two ranks.
std::optional<Straggler> slowest_rank(const std::vector<RankInterval>& ranks);

// Tells when one rank has been the straggler, at least kSlowerBy slower than the median rank, for kIntervals log
// intervals in a row: once per such streak.
class StragglerWatch {
 public:
  static constexpr double kSlowerBy = 0.20;
  static constexpr int kIntervals = 3;

  // True when this interval completes a streak.
  bool observe(const std::optional<Straggler>& s);

 private:
  int64_t rank_ = -1;
  int streak_ = 0;
};

}  // namespace ddp
