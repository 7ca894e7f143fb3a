// ddprun's own signal handling: --signals-to-handle are recorded for forwarding, SIGCHLD wakes the loop.
#pragma once

#include <vector>

namespace ddp {

// Installs the handlers for `forwarded` and SIGCHLD (and ignores SIGPIPE). Call once, before starting workers.
// SIGINT and SIGHUP stay ignored when ddprun was started with them ignored.
void install_launcher_signal_handlers(const std::vector<int>& forwarded);
// Readable whenever a handled signal arrived; drain it with drain_wake_fd().
int launcher_wake_fd();
void drain_wake_fd();
// The first forwarded signal received (0 if none), and how many have arrived (a SIGUSR1 after another not counted).
int received_stop_signal();
int received_stop_signal_count();
// The newest of them (a SIGTERM after SIGUSR1, say).
int received_last_stop_signal();
// Whether a stop signal has arrived: what the launcher's waits check to give up.
inline bool interrupted() { return received_stop_signal() != 0; }

}  // namespace ddp
