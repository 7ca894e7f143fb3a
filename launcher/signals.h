// ddprun's own signal handling: SIGINT/SIGTERM/SIGHUP are recorded for forwarding, SIGCHLD wakes the loop.
#pragma once

namespace ddp {

// Installs the handlers (and ignores SIGPIPE). Call once, before starting workers. SIGINT and SIGHUP stay
// ignored when ddprun was started with them ignored.
void install_launcher_signal_handlers();
// Readable whenever a handled signal arrived; drain it with drain_wake_fd().
int launcher_wake_fd();
void drain_wake_fd();
// The first SIGINT/SIGTERM/SIGHUP received (0 if none), and how many have arrived.
int received_stop_signal();
int received_stop_signal_count();

}  // namespace ddp
