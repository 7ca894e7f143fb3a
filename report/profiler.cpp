// StepProfiler: profile.steps training steps traced by LibTorch's profiler (Kineto) into a Chrome/Perfetto trace.
#include "report/profiler.h"

#include "base/atomic_file.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#ifdef DDP_WITH_CUDA
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

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

// torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python"): every allocation and free
// with its size, stream and time. Its frames would be Python's, which ddptrain has none of; C++ frames ("all") would
// cost an unwind per allocation and a symbolisation of LibTorch at the dump.
void record_memory_history(bool on) {
#ifdef DDP_WITH_CUDA
  if (on)
    torch::cuda::_record_memory_history("all", "all", "python");
  else
    torch::cuda::_record_memory_history(std::nullopt);
#else
  (void)on;
#endif
}

std::string memory_snapshot_pickle() {
#ifdef DDP_WITH_CUDA
  return torch::cuda::_memory_snapshot_pickled();
#else
  return {};
#endif
}

bool can_record_memory(c10::Device device) {
#ifdef DDP_WITH_CUDA
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

}  // namespace

StepProfiler::StepProfiler(const ProfileConfig& cfg, std::string out_dir, int64_t rank, c10::Device device)
    : cfg_(cfg),
      path_(out_dir + "/profile/rank" + std::to_string(rank) + ".json"),
      snapshot_path_(out_dir + "/profile/memory_rank" + std::to_string(rank) + ".pickle"),
      device_(device),
      records_memory_(cfg.memory_snapshot && can_record_memory(device)) {}

StepProfiler::~StepProfiler() {
  if (!running_) return;  // an exception ended training: no partial trace is written
  profiler::disableProfiler();
  if (records_memory_) record_memory_history(false);
}

void StepProfiler::step_begins(int64_t step) {
  if (cfg_.steps == 0 || step != cfg_.start_step) return;
  if (records_memory_) record_memory_history(true);
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
  if (records_memory_) {
    const std::string pickle = memory_snapshot_pickle();
    record_memory_history(false);
    write_file_atomic(snapshot_path_, std::vector<char>(pickle.begin(), pickle.end()));
    snapshot_written_ = snapshot_path_;
  }
  return path_;
}

}  // namespace ddp
