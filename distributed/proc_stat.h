// proc_stat: a local process's start time and state from /proc/PID/stat, to tell a live peer from a gone one.
#pragma once

#include <cstdint>

namespace ddp {

// Field 22 of /proc/PID/stat (start time in clock ticks since boot), 0 when unreadable; `state` gets field 3.
uint64_t process_start_time(int64_t pid, char* state = nullptr);

// Whether process `pid` exists and is neither a zombie (killed, not yet reaped by its launcher) nor dead.
bool process_alive(int64_t pid);

}  // namespace ddp
