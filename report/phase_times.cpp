// PhaseTimes arithmetic and the straggler's attribution over ranks.
#include "report/phase_times.h"

#include <algorithm>

namespace ddp {

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& o) {
  data += o.data;
  compute += o.compute;
  comm += o.comm;
  optimizer += o.optimizer;
  return *this;
}

PhaseTimes PhaseTimes::operator/(double d) const { return {data / d, compute / d, comm / d, optimizer / d}; }

std::vector<double> rank_slots(const RankInterval& mine, int64_t rank, int64_t world_size) {
  std::vector<double> v(static_cast<size_t>(world_size) * kRankSlots, 0.0);
  double* slot = v.data() + static_cast<size_t>(rank) * kRankSlots;
  const auto t = mine.time.values();
  std::copy(t.begin(), t.end(), slot);
  slot[4] = mine.rss_peak_mib;
  return v;
}

std::vector<RankInterval> from_rank_slots(const double* summed, int64_t world_size) {
  std::vector<RankInterval> ranks(static_cast<size_t>(world_size));
  for (auto& r : ranks) {
    r.time = PhaseTimes::from({summed[0], summed[1], summed[2], summed[3]});
    r.rss_peak_mib = summed[4];
    summed += kRankSlots;
  }
  return ranks;
}

PhaseTimes mean_over_ranks(const std::vector<RankInterval>& ranks) {
  PhaseTimes sum;
  for (const auto& r : ranks) sum += r.time;
  return ranks.empty() ? sum : sum / static_cast<double>(ranks.size());
}

namespace {

double lower_median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

std::optional<Straggler> slowest_rank(const std::vector<RankInterval>& ranks) {
  if (ranks.size() < 2) return std::nullopt;
  std::vector<double> work;
  for (const auto& r : ranks) work.push_back(r.time.work());
  const auto slowest = std::max_element(work.begin(), work.end()) - work.begin();
  const double median = lower_median(work);
  Straggler s;
  s.rank = slowest;
  s.excess_s = work[slowest] - median;
  s.ratio = median > 0 ? work[slowest] / median : 1;
  // The phase of its largest excess over that phase's median rank; comm is waiting, not work.
  double largest = -1;
  for (size_t phase = 0; phase < PhaseTimes::kNames.size(); ++phase) {
    if (PhaseTimes::kNames[phase] == std::string("comm")) continue;
    std::vector<double> column;
    for (const auto& r : ranks) column.push_back(r.time.values()[phase]);
    const double excess = column[slowest] - lower_median(column);
    if (excess > largest) {
      largest = excess;
      s.phase = PhaseTimes::kNames[phase];
    }
  }
  return s;
}

bool StragglerWatch::observe(const std::optional<Straggler>& s) {
  if (!s || s->ratio < 1 + kSlowerBy) {
    rank_ = -1;
    streak_ = 0;
    return false;
  }
  streak_ = s->rank == rank_ ? streak_ + 1 : 1;
  rank_ = s->rank;
  return streak_ == kIntervals;
}

}  // namespace ddp
