// Tests that take the device as a parameter: Cpu and Cuda instances of one test (Cuda ones carry CTest's gpu label).
//
// INSTANTIATE_ON_DEVICES(Suite) names the instances OnDevice/Suite.Test/Cpu and OnDevice/Suite.Test/Cuda; the
// Cuda instances match tests/CMakeLists.txt's gpu filter (*/Cuda*), so `ctest -L gpu` runs exactly them, and they
// skip, saying why, where LibTorch sees no GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace ddp::test {

enum class TestDevice { Cpu, Cuda };

class OnDevice : public ::testing::TestWithParam<TestDevice> {
 protected:
  void SetUp() override;
  bool on_cuda() const { return GetParam() == TestDevice::Cuda; }
  // ddptrain flags placing world_size ranks on the device: none on the CPU; on CUDA --dist.device=cuda with NCCL
  // where each rank has a GPU of its own, else Gloo with CUDA tensors (ranks sharing one GPU).
  std::string device_flags(int world_size) const;
  // The same, for runs compared with each other bit-for-bit or to 1e-5 as on the CPU: on CUDA also
  // training.deterministic and float32 convolutions without TF32 (ResNet cannot: its AdaptiveAvgPool2d has no
  // deterministic CUDA backward).
  std::string reproducible_device_flags(int world_size) const;
};

std::string device_instance_name(const ::testing::TestParamInfo<TestDevice>& info);

// Why a GPU test cannot run here ("" when it can): a build without the CUDA path, or no GPU visible to LibTorch.
// OnDevice's Cuda instances and the Cuda* suites skip with it.
std::string why_no_gpu();

// A measured figure of a test ("quickstart accuracy on cuda, float16": "87.02%"): printed as one "[figure] NAME:
// VALUE" line, which scripts/gpu-check copies into its report, and recorded as a GoogleTest property.
void report_figure(const std::string& name, const std::string& value);
void report_figure(const std::string& name, double value);  // printed with 4 significant digits

}  // namespace ddp::test

#define INSTANTIATE_ON_DEVICES(Suite)                                                                      \
  INSTANTIATE_TEST_SUITE_P(OnDevice, Suite,                                                                \
                           ::testing::Values(::ddp::test::TestDevice::Cpu, ::ddp::test::TestDevice::Cuda), \
                           ::ddp::test::device_instance_name)
