// wait_for_listener: polls a TCP address until something accepts connections there (or a deadline passes).
#pragma once

#include <chrono>
#include <string>

namespace ddp {

// True once a connection to host:port succeeds; false when `timeout` passes first. Tries every ~10 ms. (c10d's TCPStore
// client sleeps a whole second after each refused connection; waiting here first saves that second when the workers
// start before the store.)
bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace ddp
