// The GPU peak table behind MFU: names as torch.cuda.get_device_name gives them, the precision's column, and the
// more specific rows first (H100 NVL before H100, A100 before A10, L40S before L40 before L4).
#include "report/device_peak.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

double peak(const std::string& name, MathPrecision p) {
  const auto d = peak_tflops(name, p);
  return d ? d->tflops : -1;
}

TEST(DevicePeak, DeviceNamesPickTheirRowAndThePrecisionItsColumn) {
  EXPECT_EQ(peak("NVIDIA H100 80GB HBM3", MathPrecision::kBf16Fp16), 989.4);
  EXPECT_EQ(peak("NVIDIA H100 80GB HBM3", MathPrecision::kTf32), 494.7);
  EXPECT_EQ(peak("NVIDIA H100 80GB HBM3", MathPrecision::kFp32), 66.9);
  EXPECT_EQ(peak("NVIDIA H100 PCIe", MathPrecision::kBf16Fp16), 756.0);
  EXPECT_EQ(peak("NVIDIA H100 NVL", MathPrecision::kBf16Fp16), 835.5);
  EXPECT_EQ(peak("NVIDIA H200", MathPrecision::kBf16Fp16), 989.4);
  EXPECT_EQ(peak("NVIDIA A100-SXM4-80GB", MathPrecision::kBf16Fp16), 312.0);
  EXPECT_EQ(peak("NVIDIA A100-SXM4-80GB", MathPrecision::kTf32), 156.0);
  EXPECT_EQ(peak("NVIDIA A10", MathPrecision::kBf16Fp16), 125.0);
  EXPECT_EQ(peak("NVIDIA L40S", MathPrecision::kBf16Fp16), 362.05);
  EXPECT_EQ(peak("NVIDIA L40", MathPrecision::kBf16Fp16), 181.0);
  EXPECT_EQ(peak("NVIDIA L4", MathPrecision::kBf16Fp16), 121.0);
  EXPECT_EQ(peak_tflops("NVIDIA H100 80GB HBM3", MathPrecision::kTf32)->device, "H100 SXM");
  EXPECT_FALSE(peak_tflops("Tesla V100-SXM2-16GB", MathPrecision::kBf16Fp16));  // not in the table: no MFU
  EXPECT_FALSE(peak_tflops("", MathPrecision::kFp32));
}

}  // namespace
}  // namespace ddp
