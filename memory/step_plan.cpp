// plan_offsets: places allocations of known lifetimes in one block of memory, overlapping only where lifetimes do not.
#include "memory/step_plan.h"

#include <algorithm>
#include <utility>

namespace ddp {
namespace {

bool live_together(const Lifetime& a, const Lifetime& b) {
  return a.allocated_at < b.freed_at && b.allocated_at < a.freed_at;
}

}  // namespace

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

StepPlan plan_offsets(const std::vector<Lifetime>& allocations, int64_t alignment) {
  const size_t n = allocations.size();
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (allocations[i].freed()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return allocations[a].bytes > allocations[b].bytes; });
  std::vector<int64_t> rounded(n);  // what each allocation takes in the block
  for (size_t i = 0; i < n; ++i) rounded[i] = round_up(std::max<int64_t>(allocations[i].bytes, 1), alignment);
  StepPlan plan;
  plan.offsets.assign(n, -1);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of placed allocations live at the same time
  for (size_t i : order) {
    const int64_t bytes = rounded[i];
    taken.clear();
    for (size_t j : placed)
      if (live_together(allocations[i], allocations[j]))
        taken.emplace_back(plan.offsets[j], plan.offsets[j] + rounded[j]);
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + bytes <= begin) break;
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.total_bytes = std::max(plan.total_bytes, offset + bytes);
    placed.push_back(i);
  }
  plan.shares_memory_with.assign(n, {});
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == j || plan.offsets[i] < 0 || plan.offsets[j] < 0) continue;
      const int64_t ei = plan.offsets[i] + std::max<int64_t>(allocations[i].bytes, 1);
      const int64_t ej = plan.offsets[j] + std::max<int64_t>(allocations[j].bytes, 1);
      if (plan.offsets[i] < ej && plan.offsets[j] < ei) plan.shares_memory_with[i].push_back(static_cast<int32_t>(j));
    }
  return plan;
}

int64_t peak_live_bytes(const std::vector<Lifetime>& allocations) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +bytes / -bytes); frees sort before allocations
  for (const auto& a : allocations) {
    events.emplace_back(a.allocated_at, a.bytes);
    if (a.freed()) events.emplace_back(a.freed_at, -a.bytes);  // one never freed stays live to the step's end
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace ddp
