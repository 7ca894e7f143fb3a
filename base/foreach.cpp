// Multi-tensor helpers: grouping by device and dtype as torch.utils._foreach_utils does.
#include "base/foreach.h"

#include <utility>

namespace ddp {

std::vector<std::vector<size_t>> group_by_device_and_dtype(const std::vector<torch::Tensor>& tensors) {
  std::vector<std::pair<std::pair<torch::Device, torch::ScalarType>, std::vector<size_t>>> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::pair<torch::Device, torch::ScalarType> key{tensors[i].device(), tensors[i].scalar_type()};
    auto it = groups.begin();
    while (it != groups.end() && it->first != key) ++it;
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  out.reserve(groups.size());
  for (auto& g : groups) out.push_back(std::move(g.second));
  return out;
}

bool uses_foreach_kernels(const torch::Device& device) { return device.is_cuda() || device.is_xpu(); }

std::vector<torch::Tensor> pick(const std::vector<torch::Tensor>& tensors, const std::vector<size_t>& indices) {
  std::vector<torch::Tensor> out;
  out.reserve(indices.size());
  for (size_t i : indices) out.push_back(tensors[i]);
  return out;
}

}  // namespace ddp
