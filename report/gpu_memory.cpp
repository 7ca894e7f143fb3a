// describe_gpu / peak_gpu_memory_bytes: CUDA device properties and the caching allocator's statistics; peak RSS.
#include "report/gpu_memory.h"

#include <c10/core/CachingDeviceAllocator.h>

#ifdef DDP_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <sys/resource.h>

#include <cstdio>

namespace ddp {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::optional<GpuDescription> describe_gpu(c10::Device device) {
#ifdef DDP_WITH_CUDA
  if (!device.is_cuda()) return std::nullopt;
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0);
  return GpuDescription{props->name, static_cast<int64_t>(props->totalGlobalMem)};
#else
  return std::nullopt;
#endif
}

std::optional<int64_t> peak_gpu_memory_bytes(c10::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::getDeviceAllocator(device.type())->getDeviceStats(device.has_index() ? device.index() : 0);
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

std::string gpu_summary(c10::Device device) {
  const auto gpu = describe_gpu(device);
  if (!gpu) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, ", %.1f GiB", static_cast<double>(gpu->total_bytes) / (1 << 30));
  return gpu->name + buf;
}

}  // namespace ddp
