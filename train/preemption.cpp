// Preemption signal handling: the first SIGTERM/SIGINT or SIGUSR1 requests a checkpoint-and-exit; a SIGTERM/SIGINT
// after any of them exits immediately (a repeated SIGUSR1, e.g. from both the scheduler and ddprun, does not).
#include "train/preemption.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace ddp {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_requeue = 0;

void on_preemption_signal(int sig) {
  if (sig == SIGUSR1) {
    g_requeue = 1;
    if (g_signal == 0) g_signal = sig;
    return;
  }
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
  sigaction(SIGUSR1, &sa, nullptr);
}

StopRequest stop_request() {
  if (g_requeue) return StopRequest::kRequeue;
  return g_signal != 0 ? StopRequest::kStop : StopRequest::kNone;
}

}  // namespace ddp
