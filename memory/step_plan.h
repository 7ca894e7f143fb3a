// plan_offsets: places allocations of known lifetimes in one block of memory, overlapping only where lifetimes do not.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp {

// One allocation of a recorded training step: its size and when it was made and freed (positions in the step's
// sequence of allocations and frees; freed_at > allocated_at, or -1: not freed within the step).
struct Lifetime {
  int64_t bytes = 0;
  int64_t allocated_at = 0;
  int64_t freed_at = 0;
  bool freed() const { return freed_at >= 0; }
};

struct StepPlan {
  std::vector<int64_t> offsets;  // per allocation, a multiple of the alignment; -1 for one never freed (not planned)
  int64_t total_bytes = 0;       // the block that holds them all
  // Per allocation, every other allocation whose bytes overlap its own (all of them live at other times): before an
  // allocation is handed out again, none of these may still be in use.
  std::vector<std::vector<int32_t>> shares_memory_with;
};

// Largest allocations first, each at the lowest offset free for its whole lifetime (greedy by size, as PyTorch's
// mobile AllocationPlanner does). For the steps of a training loop this comes to the peak of live bytes or near it.
// Allocations never freed within the step outlive it and are left out of the block (offset -1, no overlaps).
StepPlan plan_offsets(const std::vector<Lifetime>& allocations, int64_t alignment);

// n rounded up to a multiple of `multiple`.
int64_t round_up(int64_t n, int64_t multiple);

// The most bytes live at once, those never freed within the step counted to its end. Of allocations that are all
// freed, the least any plan can use.
int64_t peak_live_bytes(const std::vector<Lifetime>& allocations);

}  // namespace ddp
