// StepProfiler: profile.steps training steps traced by LibTorch's profiler (Kineto) into a Chrome/Perfetto trace.
#include "report/profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>

namespace ddp {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

// torch.profiler.profile(activities=[CPU] + [CUDA] on a GPU): Kineto's trace, without shapes, memory or stacks.
std::set<ActivityType> activities_of(c10::Device device) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (device.is_cuda()) a.insert(ActivityType::CUDA);
  return a;
}
torch::profiler::impl::ProfilerConfig kineto_config() {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO);
}

}  // namespace

StepProfiler::StepProfiler(const ProfileConfig& cfg, std::string out_dir, int64_t rank, c10::Device device)
    : cfg_(cfg), path_(out_dir + "/profile/rank" + std::to_string(rank) + ".json"), device_(device) {}

StepProfiler::~StepProfiler() {
  if (running_) profiler::disableProfiler();  // an exception ended training: no partial trace is written
}

void StepProfiler::step_begins(int64_t step) {
  if (cfg_.steps == 0 || step != cfg_.start_step) return;
  profiler::prepareProfiler(kineto_config(), activities_of(device_));
  profiler::enableProfiler(kineto_config(), activities_of(device_));
  started_ = running_ = true;
}

std::optional<std::string> StepProfiler::step_ended(int64_t step) {
  if (!running_ || step < cfg_.start_step + cfg_.steps - 1) return std::nullopt;
  return write();
}

std::optional<std::string> StepProfiler::finish() {
  if (!running_) return std::nullopt;
  return write();
}

std::optional<std::string> StepProfiler::write() {
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
  // Written beside the final name and renamed: a reader never sees half a trace.
  const std::string partial = path_ + ".partial";
  result->save(partial);
  std::filesystem::rename(partial, path_);
  return path_;
}

}  // namespace ddp
