// name_this_thread and run_this_thread_in_idle_time: the calling thread's name, and its share of the CPU.
#include "base/thread_name.h"

#include <pthread.h>
#include <sched.h>

namespace ddp {

void name_this_thread(const std::string& name) { pthread_setname_np(pthread_self(), name.substr(0, 15).c_str()); }

bool run_this_thread_in_idle_time() {
  const sched_param param{};  // SCHED_IDLE takes priority 0
  return pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0;
}

}  // namespace ddp
