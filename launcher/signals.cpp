// ddprun's own signal handling: a self-pipe woken by SIGCHLD and by the stop signals it forwards.
#include "launcher/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace ddp {
namespace {

int wake_pipe[2] = {-1, -1};
volatile sig_atomic_t first_stop_signal = 0;
volatile sig_atomic_t stop_signal_count = 0;
volatile sig_atomic_t last_stop_signal = 0;

void on_launcher_signal(int sig) {
  const int saved = errno;
  // A SIGUSR1 after another signal (the scheduler's and a user's) changes nothing; any other one counts again.
  if (sig != SIGCHLD && !(sig == SIGUSR1 && first_stop_signal != 0)) {
    if (first_stop_signal == 0) first_stop_signal = sig;
    last_stop_signal = sig;
    stop_signal_count = stop_signal_count + 1;
  }
  const char byte = static_cast<char>(sig);
  ssize_t ignored = write(wake_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

void install_launcher_signal_handlers(const std::vector<int>& forwarded) {
  if (wake_pipe[0] >= 0) return;
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  struct sigaction sa {};
  sa.sa_handler = on_launcher_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  std::vector<int> handled = forwarded;
  handled.push_back(SIGCHLD);
  for (int sig : handled) {
    // An inherited SIG_IGN (nohup; a background job of a shell without job control) stays, as in torchrun.
    struct sigaction old {};
    if ((sig == SIGINT || sig == SIGHUP) && sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, nullptr);
  }
  signal(SIGPIPE, SIG_IGN);
}

int launcher_wake_fd() { return wake_pipe[0]; }

void drain_wake_fd() {
  char buf[64];
  while (read(wake_pipe[0], buf, sizeof buf) > 0) {
  }
}

int received_stop_signal() { return first_stop_signal; }
int received_stop_signal_count() { return stop_signal_count; }
int received_last_stop_signal() { return last_stop_signal; }

}  // namespace ddp
