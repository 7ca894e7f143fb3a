// AutocastGuard: enter/exit of a CPU or CUDA autocast region (fp16 or bf16), mirroring torch.autocast.
#include "amp/autocast.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>
#include <vector>

namespace ddp {

c10::ScalarType amp_dtype(AmpDtype dtype, c10::DeviceType device) {
  switch (dtype) {
    case AmpDtype::Float16:
      return c10::kHalf;
    case AmpDtype::BFloat16:
      return c10::kBFloat16;
    case AmpDtype::Auto:
      break;
  }
  return device == c10::DeviceType::CUDA ? c10::kHalf : c10::kBFloat16;
}

std::string amp_dtype_label(c10::ScalarType dtype) {
  return dtype == c10::kHalf ? "float16" : dtype == c10::kBFloat16 ? "bfloat16" : c10::toString(dtype);
}

std::string cpu_autocast_warning(c10::ScalarType dtype, const std::unordered_map<std::string, c10::IValue>& cpu) {
  // The ISA extensions oneDNN computes each dtype with (its avx512_core_bf16 / avx512_core_fp16, avx512_core_amx
  // and avx2_vnni_2 kernels).
  static const std::vector<std::string> kBf16{"avx512_bf16", "amx_bf16", "avx_ne_convert"};
  static const std::vector<std::string> kFp16{"avx512_fp16", "amx_fp16", "avx_ne_convert"};
  const std::vector<std::string>& needed = dtype == c10::kBFloat16 ? kBf16 : kFp16;
  std::string names;
  for (const std::string& name : needed) {
    const auto it = cpu.find(name);
    if (it != cpu.end() && it->second.isBool() && it->second.toBool()) return "";
    names += (names.empty() ? "" : ", ") + name;
  }
  return "autocast to " + amp_dtype_label(dtype) + " on a CPU with none of " + names + ": oneDNN emulates " +
         amp_dtype_label(dtype) + ", which can make a step many times slower than in float32 (amp.enabled = false)";
}

AutocastGuard::AutocastGuard(c10::Device device, bool enabled, c10::ScalarType dtype) : device_type_(device.type()) {
  if (!device.is_cpu() && !device.is_cuda())
    throw std::invalid_argument("autocast supports cpu and cuda devices, got " + device.str());
  if (enabled && dtype != c10::kHalf && dtype != c10::kBFloat16)
    throw std::invalid_argument(std::string(device.is_cpu() ? "CPU" : "CUDA") +
                                " autocast supports fp16 or bf16, got " + c10::toString(dtype));
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  prev_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, enabled);
  // A disabled region with a dtype autocast does not take keeps the current one.
  if (dtype == c10::kHalf || dtype == c10::kBFloat16) at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

}  // namespace ddp
