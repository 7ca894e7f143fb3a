// make_process_group / with_cpu_backend / shutdown_group: c10d::ProcessGroup assembled from backends as
// torch.distributed's _new_process_group_helper does.
#include "distributed/process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <exception>

namespace ddp {

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, const std::vector<BackendSlot>& slots) {
  TORCH_CHECK(!slots.empty(), "make_process_group: no backend");
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  group->setDefaultBackend(slots.front().type);
  for (const auto& slot : slots) {
    const auto type = c10d::ProcessGroup::strToBackendType(slot.type);
    group->setBackend(slot.device, type, slot.backend);
  }
  group->setGroupName("0");
  return group;
}

c10::intrusive_ptr<c10d::ProcessGroup> with_cpu_backend(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                        const c10::intrusive_ptr<c10d::Backend>& cpu) {
  // The default backend keeps its place: the new CPU one if the old CPU one was the default, else the old default.
  const auto old_default = group->getDefaultBackend();
  std::vector<BackendSlot> slots{{c10::DeviceType::CPU, "custom", cpu}};
  for (const auto& device : group->getDeviceTypes()) {
    if (device.type() == c10::DeviceType::CPU) continue;
    const auto backend = group->getBackend(device.type());
    BackendSlot slot{device.type(), backend->getBackendName(), backend};
    if (backend == old_default)
      slots.insert(slots.begin(), slot);
    else
      slots.push_back(slot);
  }
  return make_process_group(group->getStore(), group->getRank(), group->getSize(), slots);
}

std::function<uint64_t()> collectives_started(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  std::vector<c10::intrusive_ptr<c10d::Backend>> counting;
  for (const auto& device : group->getDeviceTypes()) {
    auto backend = group->getBackend(device.type());
    try {
      backend->getSequenceNumberForGroup();  // c10d::Backend's own throws: not counted
      counting.push_back(std::move(backend));
    } catch (const std::exception&) {
    }
  }
  // Read when the training loop enters a phase, while the Reducer's hooks may start one: a count for a report.
  return [counting] {
    uint64_t n = 0;
    for (const auto& b : counting) n += b->getSequenceNumberForGroup();
    return n;
  };
}

void shutdown_group(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (group) group->shutdown();
}

}  // namespace ddp
