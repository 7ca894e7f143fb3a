// make_gloo_backend: the one translation unit that includes ProcessGroupGloo.hpp (and so Gloo's headers).
#include "distributed/process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace ddp {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const std::vector<std::string>& interfaces) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // TORCH_GLOO_LAZY_INIT, as torch.distributed's ProcessGroupGloo reads it: each pair of ranks connects at its first
  // message instead of every pair before the group is made (the store's address exchange goes with it).
  const bool lazy = c10d::getDefaultGlooLazyInit();
  for (const auto& name : interfaces)
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name, lazy));
  if (options->devices.empty()) options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice(lazy));
  options->threads = static_cast<int>(options->devices.size() * 2);
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  gloo->setSequenceNumberForGroup();
  return gloo;
}

}  // namespace ddp
