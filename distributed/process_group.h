// Process groups as c10d 2.x builds them: a c10d::ProcessGroup with one c10d::Backend per device type.
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/core/DeviceType.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddp {

// Where a backend serves: its device type, and the name c10d knows it by ("gloo", "nccl"; ddptrain's own
// backends are "custom": c10d casts a backend that claims "gloo" to ProcessGroupGloo).
struct BackendSlot {
  c10::DeviceType device;
  std::string type;
  c10::intrusive_ptr<c10d::Backend> backend;
};

// A ProcessGroup (group name "0", as PyTorch's default group) whose collectives on each slot's device run on the
// slot's backend; the first slot's type is the default.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, const std::vector<BackendSlot>& slots);

// The same group with its CPU backend replaced by `cpu` (the shared-memory all-reduce, a test's counter); its other
// backends stay.
c10::intrusive_ptr<c10d::ProcessGroup> with_cpu_backend(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                        const c10::intrusive_ptr<c10d::Backend>& cpu);

// c10d::ProcessGroupGloo over `store`: one device per interface in `interfaces` (GLOO_SOCKET_IFNAME's list), or
// Gloo's default device (the hostname's address) when empty. Connects every pair of ranks before it returns, or
// with TORCH_GLOO_LAZY_INIT=1 (torch.distributed's switch) each pair at its first message.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const std::vector<std::string>& interfaces);

// How many collectives this rank has started on `group`: the sum of its backends' sequence numbers (ProcessGroupGloo
// and ProcessGroupNCCL count each collective they start; the shared-memory all-reduce adds its own). A backend
// without one adds nothing.
std::function<uint64_t()> collectives_started(const c10::intrusive_ptr<c10d::ProcessGroup>& group);

// Ends the group's backends (ProcessGroup::shutdown: NCCL communicators, Gloo's threads); null is a no-op.
void shutdown_group(const c10::intrusive_ptr<c10d::ProcessGroup>& group);

}  // namespace ddp
