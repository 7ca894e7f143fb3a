// Multi-tensor ("foreach") helpers: tensors grouped by device and dtype, and where PyTorch uses the foreach kernels.
#pragma once

#include <torch/types.h>

#include <vector>

namespace ddp {

// Indices into `tensors`, one list per (device, dtype) in order of first appearance, each in the tensors' order:
// torch.utils._foreach_utils._group_tensors_by_device_and_dtype.
std::vector<std::vector<size_t>> group_by_device_and_dtype(const std::vector<torch::Tensor>& tensors);

// Whether PyTorch's defaults (foreach=None) run the multi-tensor kernels on this device: CUDA and XPU, not CPU
// (torch.utils._foreach_utils._get_foreach_kernels_supported_devices).
bool uses_foreach_kernels(const torch::Device& device);

// The tensors at `indices`.
std::vector<torch::Tensor> pick(const std::vector<torch::Tensor>& tensors, const std::vector<size_t>& indices);

}  // namespace ddp
