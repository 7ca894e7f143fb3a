// available_cpus: the CPUs this process may run on.
#pragma once

#include <cstdint>

namespace ddp {

// CPUs this process may run on (sched_getaffinity: taskset, cpusets, Slurm's binding), at least 1; Python's
// len(os.sched_getaffinity(0)).
int64_t available_cpus();

}  // namespace ddp
