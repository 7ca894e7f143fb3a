// name_this_thread and run_this_thread_in_idle_time: the calling thread's name, and its share of the CPU;
// start_in_idle_time: work on a thread of its own at idle priority.
#pragma once

#include <future>
#include <string>
#include <utility>

namespace ddp {

// The name ps, top, gdb, perf and ddptrain's hang report show. Linux keeps 15 characters of it ("ddp-data-3"); a
// longer name is cut there.
void name_this_thread(const std::string& name);

// Linux's SCHED_IDLE for the calling thread alone: it runs on CPU time the process's other threads and the host's
// other processes leave, and takes almost none from them while they run (the scheduler's smallest weight, sched(7)).
// For work that must not slow training but may take longer, as a checkpoint's background write. Once lowered, an
// unprivileged thread cannot raise it back; false where the kernel refuses (the thread then runs as before).
bool run_this_thread_in_idle_time();

// Starts `work` on a thread of its own, named `name`, at idle priority; the future holds its result or exception.
template <typename Work>
auto start_in_idle_time(std::string name, Work work) {
  return std::async(std::launch::async, [name = std::move(name), work = std::move(work)]() mutable {
    name_this_thread(name);
    run_this_thread_in_idle_time();
    return work();
  });
}

}  // namespace ddp
