// The peak table: dense tensor-core and CUDA-core TFLOP/s per GPU model, from NVIDIA's product datasheets.
#include "report/device_peak.h"

#include <array>

namespace ddp {
namespace {

struct Row {
  const char* match;   // a substring of the device name; the first matching row wins (more specific rows first)
  const char* unless;  // a substring that rules the row out ("" = none)
  const char* device;
  double fp32, tf32, bf16;
};

// Dense figures: half of the "with sparsity" tensor-core figures NVIDIA lists.
constexpr std::array<Row, 10> kRows = {{
    {"H100 NVL", "", "H100 NVL", 60.0, 417.5, 835.5},
    {"H100 PCIe", "", "H100 PCIe", 51.2, 378.0, 756.0},
    {"H100", "", "H100 SXM", 66.9, 494.7, 989.4},
    {"H200 NVL", "", "H200 NVL", 60.0, 417.5, 835.5},
    {"H200", "", "H200 SXM", 66.9, 494.7, 989.4},
    {"A100", "", "A100", 19.5, 156.0, 312.0},
    {"L40S", "", "L40S", 91.6, 183.0, 362.05},
    {"L40", "L40S", "L40", 90.5, 90.5, 181.0},
    {"L4", "L40", "L4", 30.3, 60.0, 121.0},
    {"A10", "A100", "A10", 31.2, 62.5, 125.0},
}};

}  // namespace

std::optional<DevicePeak> peak_tflops(const std::string& gpu_name, MathPrecision precision) {
  for (const Row& row : kRows) {
    if (gpu_name.find(row.match) == std::string::npos) continue;
    if (*row.unless && gpu_name.find(row.unless) != std::string::npos) continue;
    const double tflops = precision == MathPrecision::kFp32   ? row.fp32
                          : precision == MathPrecision::kTf32 ? row.tf32
                                                              : row.bf16;
    return DevicePeak{row.device, tflops};
  }
  return std::nullopt;
}

const char* precision_name(MathPrecision p) {
  switch (p) {
    case MathPrecision::kFp32:
      return "float32";
    case MathPrecision::kTf32:
      return "TF32";
    case MathPrecision::kBf16Fp16:
      return "bfloat16/float16";
  }
  return "?";
}

}  // namespace ddp
