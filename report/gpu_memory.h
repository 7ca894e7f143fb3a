// Memory facts for reports: the GPU's name and memory, the caching allocator's peak (torch.cuda.* equivalents), and
// the process's peak resident set size.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ddp {

struct GpuDescription {
  std::string name;         // torch.cuda.get_device_name(device)
  int64_t total_bytes = 0;  // torch.cuda.get_device_properties(device).total_memory
};

// nullopt for a CPU device (or a build without CUDA).
std::optional<GpuDescription> describe_gpu(c10::Device device);

// torch.cuda.max_memory_allocated(device): the peak of bytes held by tensors since the start (or the last reset);
// nullopt for a CPU device.
std::optional<int64_t> peak_gpu_memory_bytes(c10::Device device);

// This process's peak resident set size (getrusage's ru_maxrss), MiB.
double peak_rss_mib();

// "NVIDIA H100 80GB HBM3, 79.1 GiB" or "" for a CPU device.
std::string gpu_summary(c10::Device device);

}  // namespace ddp
