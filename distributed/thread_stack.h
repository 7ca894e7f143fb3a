// ThreadStack: the native call stack of one chosen thread (the training thread), taken from another thread by a
// signal, for the hang watch's report.
#pragma once

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

}  // namespace ddp
