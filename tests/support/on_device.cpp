// OnDevice: the Cpu/Cuda parameter of device tests, the flags that place ranks there, and reported figures.
#include "tests/support/on_device.h"

#include <torch/cuda.h>

#include <cstdio>
#include <iostream>

namespace ddp::test {

std::string why_no_gpu() {
#ifndef DDP_WITH_CUDA
  return "ddptrain was built without the CUDA path (DDP_WITH_CUDA=OFF or a CPU-only LibTorch)";
#endif
  if (!torch::cuda::is_available()) return "no CUDA GPU visible to LibTorch (torch::cuda::is_available())";
  return "";
}

void OnDevice::SetUp() {
  if (!on_cuda()) return;
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
}

std::string OnDevice::device_flags(int world_size) const {
  if (!on_cuda()) return "";
  const bool gpu_per_rank = static_cast<int>(torch::cuda::device_count()) >= world_size;
  return std::string(" --dist.device=cuda --dist.backend=") + (gpu_per_rank ? "nccl" : "gloo");
}

std::string OnDevice::reproducible_device_flags(int world_size) const {
  if (!on_cuda()) return "";
  return device_flags(world_size) + " --training.deterministic=true --training.cudnn_allow_tf32=false";
}

std::string device_instance_name(const ::testing::TestParamInfo<TestDevice>& info) {
  return info.param == TestDevice::Cuda ? "Cuda" : "Cpu";
}

void report_figure(const std::string& name, const std::string& value) {
  std::cout << "[figure] " << name << ": " << value << std::endl;
  ::testing::Test::RecordProperty(name, value);
}

void report_figure(const std::string& name, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  report_figure(name, std::string(text));
}

}  // namespace ddp::test
