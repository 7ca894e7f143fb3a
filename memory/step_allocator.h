// StepAllocator: LibTorch's CPU allocator for training; steady-state steps take their large temporaries from one
// planned block.
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>
#include <memory>

namespace ddp {

// Opt-in (job.step_memory = "planned"). glibc's heap, given the activations and gradients of a training step
// (allocated and freed in a different order), ends up ~40% larger than the step's peak of live bytes (ResNet-18,
// batch 64: ~40 MiB of heap for 28 MiB live), and keeps it resident. This allocator records the large allocations
// (>= kMinBytes) of one steady-state step on the training thread, plans their offsets in one block
// (memory/step_plan.h: about the peak of live bytes) and hands out the same offsets in every later step whose
// allocations come in the same sizes and order. Anything else is served as before, so a step that differs (the
// last, smaller batch of an epoch) costs nothing but the plan's use: an allocation that no longer matches the plan,
// or whose planned bytes are still in use, and every later one of that step, go to the fallback. Before the plan
// exists (setup and the first steps, which create the optimizer state and DDP's rebuilt buckets), large allocations
// on the training thread are mapped one by one and unmapped when freed, so that they leave no holes in the heap:
// exact, but page faults and unmapping make those steps several times slower (ResNet-18, 2 ranks: +3 s in all),
// which is why it is not the default. Other threads, small allocations and allocations outside steps after the
// first use LibTorch's own CPU allocation (c10::alloc_cpu). The bytes of a tensor are the same whichever way they
// were allocated: training results do not change (tested bit for bit).
class StepAllocator final : public c10::Allocator {
 public:
  static constexpr int64_t kMinBytes = 64 * 1024;
  static constexpr int64_t kRecordedStep = 3;  // steps 1 and 2 create optimizer state and DDP's rebuilt buckets
  static constexpr int64_t kMaxPlans = 8;      // then a run whose steps never repeat goes on without a plan

  // Makes the step allocator LibTorch's CPU allocator (once per process) and starts a run with the calling thread as
  // the training thread: the step count and any plan are reset.
  static StepAllocator& start_run();
  // The process's step allocator if start_run was called, else nullptr.
  static StepAllocator* installed();

  // Bracket one optimizer step (all its micro-batches) on the training thread; calls from other threads are ignored.
  void begin_step();
  void end_step();

  struct Stats {
    int64_t steps = 0;           // steps begun on the training thread in this run
    int64_t plan_bytes = 0;      // the planned block (0: no plan yet)
    int64_t planned_steps = 0;   // steps whose large allocations all came from the plan
    int64_t diverged_steps = 0;  // steps after the plan existed that did not (in part or at all)
    int64_t planned_allocations = 0;
    int64_t mapped_allocations = 0;  // large ones on the training thread mapped on their own (slow: page faults)
    int64_t plans = 0;               // plans recorded (at most kMaxPlans; then steps use LibTorch's allocation)
  };
  Stats stats() const;

  c10::DataPtr allocate(size_t bytes) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
  c10::DeleterFnPtr raw_deleter() const override;

  StepAllocator();
  ~StepAllocator() override;

 private:
  struct State;
  static void release(void* data);
  static bool release_planned(State& s, void* data);
  std::unique_ptr<State> state_;
};

}  // namespace ddp
