// Test helper: runs a function in a forked child with a time limit and reports how it ended and its peak memory.
#pragma once

#include <functional>
#include <string>

namespace ddp::test {

struct ChildRun {
  bool exited = false;       // returned normally (false: killed by a signal, e.g. SIGSEGV or the time limit)
  int signal = 0;            // the signal that ended it
  std::string result;        // what fn returned, or "threw: " + the message of the exception it threw
  double peak_growth_mb = 0; // how far its resident memory rose above what it had when it started (VmHWM - VmRSS)
};

// fn runs in a fork of this process (so a crash or a runaway allocation cannot take the test binary with it),
// killed after timeout_s seconds (SIGALRM).
ChildRun run_in_child(const std::function<std::string()>& fn, unsigned timeout_s = 60);

}  // namespace ddp::test
