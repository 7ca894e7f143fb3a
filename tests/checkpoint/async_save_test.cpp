// checkpoint.async: the background write produces the same checkpoints as the synchronous one, training goes on while
// it runs, and a failed background write is reported when it is settled (the next checkpoint or the run's end).
#include "checkpoint/checkpointer.h"
#include "tests/checkpoint/resume_job.h"
#include "tests/support/on_device.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> folder_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Each pair of checkpoint files torch.load reads as the same dict, every tensor a CPU tensor and equal bit for bit,
// the config snapshots equal but for their checkpoint.async line; prints what differs.
constexpr const char* kSameCheckpoints = R"(
import sys, torch
def bits(t):
    return t.reshape(-1).view(torch.uint8)
def same(a, b, at):
    if isinstance(a, torch.Tensor):
        ok = isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        ok = ok and a.device.type == "cpu" and b.device.type == "cpu" and torch.equal(bits(a), bits(b))
    elif isinstance(a, dict):
        ok = a.keys() == b.keys() and all(same(a[k], b[k], at + "/" + str(k)) for k in a)
    elif isinstance(a, (list, tuple)):
        ok = len(a) == len(b) and all(same(x, y, at + "/" + str(i)) for i, (x, y) in enumerate(zip(a, b)))
    else:
        ok = a == b
    if not ok:
        print("differs:", at, repr(a)[:80], repr(b)[:80])
    return ok
for a, b in zip(sys.argv[1::2], sys.argv[2::2]):
    x, y = torch.load(a), torch.load(b)
    assert "async = true" in x["config"] and "async = false" in y["config"], a
    x["config"] = x["config"].replace("async = true", "async = false")
    assert same(x, y, a), a
print("same checkpoints")
)";

// The same run (`args` after the config) with checkpoint.async on and off, in the same job.out_dir one after the
// other: the same checkpoint files (retention kept the same three), each the same state dict of CPU tensors, and the
// same model.pt byte for byte. (The files' bytes differ only by the config snapshot, which records checkpoint.async.)
void expect_background_and_synchronous_saves_alike(const std::string& args) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --training.max_steps=20 --job.out_dir=" + dir / "run " + args;
  for (const char* mode : {"true", "false"}) {
    const CommandResult r = ckpt_train(cfg, "--checkpoint.async=" + std::string(mode));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    fs::rename(dir / "run", dir / mode);
  }
  const std::vector<std::string> files = folder_files(dir / "true/checkpoints");
  EXPECT_EQ(files,
            (std::vector<std::string>{"latest.json", "step-00000012.json", "step-00000012.pt", "step-00000016.json",
                                      "step-00000016.pt", "step-00000020.json", "step-00000020.pt"}));
  EXPECT_EQ(files, folder_files(dir / "false/checkpoints"));
  std::string pairs;
  for (const std::string& f : files)
    if (f.size() > 3 && f.substr(f.size() - 3) == ".pt")
      pairs += " " + shell_quote(dir / ("true/checkpoints/" + f)) + " " + shell_quote(dir / ("false/checkpoints/" + f));
  const CommandResult same = run_command(python() + " -c " + shell_quote(kSameCheckpoints) + pairs);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("same checkpoints"), std::string::npos) << same.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "true/checkpoints/latest.json", dir / "false/checkpoints/latest.json"));
  EXPECT_TRUE(ckpt_same_bytes(dir / "true/model.pt", dir / "false/model.pt"));
}

TEST(CheckpointAsync, BackgroundAndSynchronousSavesWriteTheSameCheckpoints) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  expect_background_and_synchronous_saves_alike("");
}

// On a GPU, with an EMA too: the optimizer's momentum and the averaged model come off the device as host copies on
// the training thread; the background thread serialises them into the same files as the synchronous save.
TEST(CudaCheckpoint, BackgroundAndSynchronousSavesOfAGpuStateWriteTheSameCheckpoints) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  expect_background_and_synchronous_saves_alike(
      "--dist.device=cuda --training.deterministic=true "
      "--training.ema_decay=0.9");
}

// A state holding a tensor outside host memory (here on the meta device, which has no values to read) fails the save
// with a line naming its entry: the background thread reads host memory only. Nothing of that step is left.
TEST(CheckpointAsync, AStateOutsideHostMemoryFailsTheSaveNamingItsEntry) {
  TempDir dir;
  CheckpointConfig cfg;
  cfg.every_steps = 1;
  cfg.dir = dir / "checkpoints";
  Checkpointer checkpointer(
      cfg, dir.path(), DistContext{}, [](const std::string&) {}, [](const std::string&) {});
  c10::impl::GenericDict buffers(c10::StringType::get(), c10::AnyType::get());
  buffers.insert("momentum_buffer", torch::zeros({3}, torch::TensorOptions().device(torch::kMeta)));
  c10::impl::GenericDict per_param(c10::IntType::get(), c10::AnyType::get());
  per_param.insert(0, buffers);
  c10::impl::GenericDict optimizer(c10::StringType::get(), c10::AnyType::get());
  optimizer.insert("state", per_param);
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("model", torch::ones({3}));
  state.insert("optimizer", optimizer);
  checkpointer.save([&] { return state; }, 1, 0, -1);
  const std::string error = error_of([&] { checkpointer.settle(); });
  EXPECT_NE(error.find("checkpoint at step 1 failed: the checkpoint's state holds a tensor outside host memory "
                       "(optimizer/state/0/momentum_buffer on meta)"),
            std::string::npos)
      << error;
  EXPECT_TRUE(!fs::exists(dir / "checkpoints") || folder_files(dir / "checkpoints").empty());
}

// The step-4 write fails like a full disk (on_error = fail). In the background, training goes on past step 4 and the
// failure stops the run when the next checkpoint (step 8) settles it; synchronously the run stops at step 4. Either
// way nothing partial is left and the error is the same line.
TEST(CheckpointAsync, AFailedBackgroundWriteStopsTheRunWhenItIsSettled) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --metrics.log_every_steps=1 --metrics.progress=plain";
  const std::string full_disk = fault_env("write", "step-00000004.pt.tmp-", "enospc");
  for (const std::string mode : {"true", "false"}) {
    SCOPED_TRACE("checkpoint.async = " + mode);
    const CommandResult r = ckpt_train(cfg, "--checkpoint.async=" + mode + " --job.out_dir=" + dir / mode, full_disk);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const size_t error = r.output.find("error: checkpoint at step 4 failed: " + dir / mode +
                                       "/checkpoints/step-00000004.pt: write failed: No space left on device");
    ASSERT_NE(error, std::string::npos) << r.output;
    const size_t step8 = r.output.find("step 8/");
    if (mode == "true") {
      EXPECT_NE(step8, std::string::npos) << r.output;
      EXPECT_LT(step8, error) << r.output;
    } else {
      EXPECT_EQ(r.output.find("step 5/"), std::string::npos) << r.output;
    }
    EXPECT_EQ(r.output.find("step 9/"), std::string::npos) << r.output;
    for (const std::string& f : folder_files(dir / (mode + "/checkpoints")))
      EXPECT_EQ(f.find("step-00000004"), std::string::npos) << f;
  }
}

// The largest rss_peak_mib of a run's train records (metrics.jsonl).
double peak_rss_mib(const std::string& out_dir) {
  double peak = 0;
  for (const std::string& line : read_lines(out_dir + "/metrics.jsonl")) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.value("kind", "") == "train") peak = std::max(peak, record.at("rss_peak_mib").get<double>());
  }
  return peak;
}

// The step-2 checkpoint's first write takes 15 s (the fault shim sleeps in it): it is made by the checkpoint's
// background thread at normal priority, while the bytes are serialised on a thread of their own at idle priority.
// Training goes on to the next checkpoint (step 4), which waits for the slow write first, saying so, and only then
// copies the state: into the buffers the step-2 copies let go, so the run's peak RSS stays that of a run whose writes
// are quick (a second copy of ResNet-18's weights and momentum, made while the slow write still held the first,
// would add ~85 MiB). The slow write changes nothing written.
TEST(CheckpointAsync, ASlowBackgroundWriteIsWaitedForBeforeTheNextCopyOfTheState) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 256, 16, 5,
      {"data.batch_size=16", "model.name=resnet18", "optimizer.momentum=0.9", "training.max_steps=8",
       "checkpoint.every_steps=2", "checkpoint.keep_last=1", "metrics.log_every_steps=1", "metrics.progress=plain"});
  const CommandResult quick = ckpt_train(cfg, "--job.out_dir=" + dir / "quick");
  ASSERT_EQ(quick.exit_code, 0) << quick.output;
  const CommandResult slow = ckpt_train(cfg, "--job.out_dir=" + dir / "slow",
                                        fault_env("write", "step-00000002.pt.tmp-", "slow") + " DDP_FAULT_SECONDS=15");
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  const size_t shim = slow.output.find(" thread ddp-checkpoint (SCHED_OTHER) sleeps 15 s in a write of " +
                                       dir / "slow" + "/checkpoints/step-00000002.pt.tmp-");
  ASSERT_NE(shim, std::string::npos) << slow.output;
  const std::string threads = slow.output.substr(shim, slow.output.find('\n', shim) - shim);
  EXPECT_NE(threads.find("ddp-serialise (SCHED_IDLE)"), std::string::npos) << threads;
  size_t idle = 0;  // the serialising thread alone: training and the file's system calls at normal priority
  for (size_t at = threads.find("SCHED_IDLE"); at != std::string::npos; at = threads.find("SCHED_IDLE", at + 1)) ++idle;
  EXPECT_EQ(idle, 1u) << threads;
  const size_t waiting = slow.output.find("waiting for the checkpoint of step 2 to finish writing (started ");
  ASSERT_NE(waiting, std::string::npos) << slow.output;
  EXPECT_LT(slow.output.find("step 4/"), waiting) << slow.output;
  EXPECT_GT(slow.output.find("step 5/"), waiting) << slow.output;
  EXPECT_LE(peak_rss_mib(dir / "slow"), peak_rss_mib(dir / "quick") + 40) << slow.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "quick/model.pt", dir / "slow/model.pt"));
}

}  // namespace
}  // namespace ddp::test
