// AutocastGuard: RAII mixed-precision region, torch.autocast(device_type, dtype, enabled) for LibTorch 1.13.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace ddp {

// Parses amp.dtype ("bf16" | "fp16") into kBFloat16 / kHalf; anything else throws std::invalid_argument.
c10::ScalarType amp_dtype_from_name(const std::string& name);

// Enters an autocast region exactly as torch.autocast.__enter__ does (CPU: set_cpu_enabled,
// set_autocast_cpu_dtype; CUDA: set_autocast_gpu_dtype, set_enabled; then increment_nesting and the cache flag)
// and restores the previous state on destruction (clearing the cast cache when the outermost region exits).
// enabled = false still enters a region, one that turns autocast off (like torch.autocast(enabled=False)).
// When enabled, CPU accepts only bf16 and CUDA fp16 or bf16; others throw std::invalid_argument.
class AutocastGuard {
 public:
  AutocastGuard(c10::Device device, bool enabled, c10::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool on_cuda_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace ddp
