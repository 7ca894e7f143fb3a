// ThreadStack: the native call stacks of this process's threads (the training thread first), each taken from another
// thread by a signal, for the hang watch's report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace ddp {

// Makes the calling thread the one whose stack stack_of_watched_thread() takes; installs the signal handler
// (SIGRTMIN + 7) once per process.
void watch_this_thread();

// The watched thread's frames, innermost first: "libgloo.so: gloo::transport::tcp::UnboundBuffer::waitRecv(...)+0x3c",
// or "ddptrain+0x1a2b3c" where the executable exports no symbol (`addr2line -fCe ddptrain 0x1a2b3c` names it).
// Empty when no thread is watched or it did not answer within `wait` (a stopped thread cannot).
std::vector<std::string> stack_of_watched_thread(std::chrono::milliseconds wait);

// The other threads of this process (neither the caller nor the watched thread), threads with the same frames in one
// entry: each is asked in turn and has `wait_each` to answer (a thread that blocks the signal, or is stopped, has no
// frames). At most `max_stacks` distinct stacks, the most shared first.
struct ThreadStacks {
  std::vector<pid_t> tids;
  std::vector<std::string> names;   // each thread's name (/proc/self/task/TID/comm), as tids
  std::vector<std::string> frames;  // innermost first; empty: none answered
};
std::vector<ThreadStacks> stacks_of_other_threads(std::chrono::milliseconds wait_each, size_t max_stacks);

}  // namespace ddp
