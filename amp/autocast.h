// AutocastGuard: RAII mixed-precision region, torch.autocast(device_type, dtype, enabled) on LibTorch 2.x.
#pragma once

#include "config/choices.h"

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <unordered_map>

namespace ddp {

// amp.dtype as a ScalarType: kHalf or kBFloat16; Auto is float16 on CUDA and bfloat16 elsewhere (what each device's
// autocast defaults to).
c10::ScalarType amp_dtype(AmpDtype dtype, c10::DeviceType device = c10::DeviceType::CPU);
// "float16" / "bfloat16": torch's name for an autocast dtype.
std::string amp_dtype_label(c10::ScalarType dtype);

// The warning for CPU autocast to `dtype` on a CPU with none of the instructions that compute in it (by the names of
// at::cpu::get_cpu_capabilities, which cpuinfo fills): oneDNN then emulates the dtype, and without AVX-512 a step
// can take many times as long as in float32. "" where one of them is there.
std::string cpu_autocast_warning(c10::ScalarType dtype, const std::unordered_map<std::string, c10::IValue>& cpu);

// Enters an autocast region exactly as torch.autocast.__enter__ does (set_autocast_enabled and set_autocast_dtype
// for the device type, then increment_nesting and the cache flag) and restores the previous state on destruction
// (clearing the cast cache when the outermost region exits). enabled = false still enters a region, one that turns
// autocast off (like torch.autocast(enabled=False)). CPU and CUDA accept fp16 and bf16 (torch.autocast's
// supported dtypes for both); others throw std::invalid_argument.
class AutocastGuard {
 public:
  AutocastGuard(c10::Device device, bool enabled, c10::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace ddp
