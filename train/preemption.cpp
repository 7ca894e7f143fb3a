// Preemption signal handling: first SIGTERM/SIGINT requests a checkpoint-and-exit, the second exits immediately.
#include "train/preemption.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace ddp {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void on_preemption_signal(int sig) {
  if (g_signal != 0) {
    const char msg[] = "error: second signal received; exiting without a checkpoint\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
  g_signal = sig;
}

}  // namespace

void install_preemption_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_preemption_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int preemption_signal() { return static_cast<int>(g_signal); }

}  // namespace ddp
