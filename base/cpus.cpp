// available_cpus from the process's affinity mask.
#include "base/cpus.h"

#include <sched.h>

#include <algorithm>

namespace ddp {

int64_t available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

}  // namespace ddp
