// Faults while writing checkpoints and model.pt: SIGKILL inside the write (write/fsync/rename/unlink, via the
// LD_PRELOAD fault shim), full and read-only disks (the shim, and a small tmpfs in a private mount namespace):
// every run ends bit-identical to an uninterrupted one after a plain rerun, or with one clear error and nothing lost.
#include "checkpoint/checkpoint_store.h"
#include "tests/checkpoint/resume_job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <regex>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// Leftovers a run must not leave behind in `dir` once it finished: temp files and payloads without a manifest.
std::vector<std::string> faults_debris(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool orphan = name.size() > 3 && name.compare(0, 5, "step-") == 0 &&
                        name.compare(name.size() - 3, 3, ".pt") == 0 &&
                        !fs::exists(fs::path(e.path()).replace_extension(".json"));
    if (name.find(".tmp-") != std::string::npos || orphan) out.push_back(name);
  }
  return out;
}

// One uninterrupted run of one epoch (20 steps, checkpoints at 4, 8, .., 20) shared by the kill points (each compares
// its final model.pt against it), its file operations under its out_dir counted by the fault shim (their number follows
// from the files' sizes and the steps, not from timing).
class CheckpointKill : public ::testing::TestWithParam<std::tuple<std::string, std::string, int>> {
 protected:
  static void SetUpTestSuite() {
    reference_ = new TempDir;
    cfg_ = ckpt_job_config(*reference_) + " --training.epochs=1";
    auto r = ckpt_train(cfg_, "--job.out_dir=" + *reference_ / "full", fault_env("any", "/full/", "count"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("fault shim: ([0-9]+) matching calls"))) << r.output;
    operations_ = std::stoi(m[1]);
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  // Runs the job killed by SIGKILL at the fault, then again as it is; the result must equal the reference.
  static void kill_then_rerun(const std::string& out, const std::string& env, const std::string& what) {
    auto killed = ckpt_train(cfg_, "--job.out_dir=" + out, env);
    ASSERT_EQ(killed.exit_code, 128 + 9) << what << "\n" << killed.output;
    auto rerun = ckpt_train(cfg_, "--job.out_dir=" + out);
    ASSERT_EQ(rerun.exit_code, 0) << what << "\n" << rerun.output;
    EXPECT_TRUE(ckpt_same_bytes(*reference_ / "full/model.pt", out + "/model.pt")) << what << "\n" << rerun.output;
    EXPECT_EQ(faults_debris(out + "/checkpoints"), std::vector<std::string>{}) << what;
    EXPECT_EQ(faults_debris(out), std::vector<std::string>{}) << what;
  }
  static TempDir* reference_;
  static std::string cfg_;
  static int operations_;
};
TempDir* CheckpointKill::reference_ = nullptr;
std::string CheckpointKill::cfg_;
int CheckpointKill::operations_ = 0;

TEST_P(CheckpointKill, KilledInsideTheWriteThenRerunIsBitIdentical) {
  const auto& [op, path, nth] = GetParam();
  TempDir dir;
  kill_then_rerun(dir / "o", fault_env(op, path, "kill", nth), op + " " + path + " #" + std::to_string(nth));
}

// Every step of a checkpoint write: payload (mid-write, fsync, rename), the line record, the manifest, retention's
// deletions (at step 16, of step 4), model.pt's own write and rename, and the Hub files' writes after it.
INSTANTIATE_TEST_SUITE_P(
    Checkpoint, CheckpointKill,
    ::testing::Values(
        std::make_tuple("write", "step-00000008.pt.tmp-", 1), std::make_tuple("fsync", "step-00000008.pt.tmp-", 1),
        std::make_tuple("rename", "step-00000008.pt.tmp-", 1), std::make_tuple("write", "latest.json.tmp-", 2),
        std::make_tuple("rename", "step-00000008.json.tmp-", 1), std::make_tuple("unlink", "step-00000004.json", 1),
        std::make_tuple("unlink", "step-00000004.pt", 1), std::make_tuple("write", "model.pt.tmp-", 1),
        std::make_tuple("rename", "model.pt.tmp-", 1), std::make_tuple("write", "model.safetensors.tmp-", 1),
        std::make_tuple("write", "config.json.tmp-", 1)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                         std::to_string(std::get<2>(info.param));
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

TEST_F(CheckpointKill, KilledAtRandomFileOperationsThenRerunIsBitIdentical) {
  // Two random ones of the reference run's file operations under its out_dir (metrics lines, 5 checkpoints, model.pt).
  ASSERT_GE(operations_, 20);  // at least a write, fsync and rename for each of the 5 checkpoints
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 2; ++trial) {
    const int nth = std::uniform_int_distribution<int>(1, operations_)(rng);
    TempDir dir;
    kill_then_rerun(dir / "o", fault_env("any", "/o/", "kill", nth),
                    "seed " + std::to_string(seed) + ": SIGKILL at file operation #" + std::to_string(nth));
  }
}

// SIGTERM while the background thread writes step 8's checkpoint (checkpoint.async): the stop waits for that write,
// which ends complete, saves the step it stops at and exits 0 as any SIGTERM stop; the rerun resumes from there and
// ends bit-identical to the uninterrupted run.
TEST_F(CheckpointKill, SigtermDuringABackgroundWriteWaitsForItThenStopsAndResumesBitIdentical) {
  TempDir dir;
  const std::string out = dir / "o";
  auto stopped = ckpt_train(cfg_, "--job.out_dir=" + out, fault_env("write", "step-00000008.pt.tmp-", "term"));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stopped.output, m, std::regex("preempted by a signal at step ([0-9]+)")))
      << stopped.output;
  const int stop = std::stoi(m[1]);
  EXPECT_GT(stop, 8) << stopped.output;
  EXPECT_LT(stop, 20) << stopped.output;
  EXPECT_FALSE(fs::exists(out + "/model.pt"));
  const CheckpointStore store(out + "/checkpoints", 0, 0);
  for (const int64_t step : {int64_t{8}, int64_t{stop}})
    EXPECT_TRUE(fs::exists(store.manifest_path(step))) << step << "\n" << stopped.output;
  EXPECT_EQ(faults_debris(out + "/checkpoints"), std::vector<std::string>{});
  auto rerun = ckpt_train(cfg_, "--job.out_dir=" + out);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("resumed from"), std::string::npos) << rerun.output;
  EXPECT_TRUE(ckpt_same_bytes(*reference_ / "full/model.pt", out + "/model.pt")) << rerun.output;
}

TEST(CheckpointFaults, FullOrReadOnlyDiskWhileWritingModelPtIsACleanErrorKeepingThePreviousOne) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  const std::string model = dir / "o/model.pt";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=4").exit_code, 0);
  const std::string previous = read_file(model);
  const std::vector<std::pair<std::string, std::string>> faults = {
      {fault_env("write", "model.pt.tmp-", "enospc"), model + ": write failed: No space left on device"},
      {fault_env("rename", "model.pt.tmp-", "erofs"), model + ": rename failed: Read-only file system"}};
  for (const auto& [env, message] : faults) {
    auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=6", env);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(
        r.output.find("error: writing the trained model failed: " + message + " (any previous model.pt is intact"),
        std::string::npos)
        << r.output;
    EXPECT_TRUE(read_file(model) == previous);
    EXPECT_EQ(faults_debris(dir / "o"), std::vector<std::string>{});
  }
}

// The final outputs are one set: a full disk while writing any of them (model_ema.safetensors, written before
// model.pt) leaves every previous one as it was, not a new model.pt beside the old EMA's files; and a run without an
// EMA removes an earlier run's model_ema.pt and model_ema.safetensors (and a TorchScript export), which belong to
// other weights than its model.pt.
TEST(CheckpointFaults, TheFinalOutputsAreReplacedTogetherOrNotAtAll) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  const std::string out = dir / "o";
  const std::vector<std::string> names = {"model.pt", "model_ema.pt", "model.safetensors", "model_ema.safetensors",
                                          "config.json"};
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + out + " --training.max_steps=4 --training.ema_decay=0.9").exit_code, 0);
  std::vector<std::string> previous;
  for (const std::string& name : names) previous.push_back(read_file(out + "/" + name));
  auto r = ckpt_train(cfg, "--job.out_dir=" + out + " --training.max_steps=6 --training.ema_decay=0.9",
                      fault_env("write", "model_ema.safetensors.tmp-", "enospc"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: writing the trained model failed: " + out +
                          "/model_ema.safetensors: write failed: No space left on device (any previous model.pt is "
                          "intact"),
            std::string::npos)
      << r.output;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_TRUE(read_file(out + "/" + names[i]) == previous[i]) << names[i];
  EXPECT_EQ(faults_debris(out), std::vector<std::string>{});

  const std::string plain = dir / "p";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + plain + " --training.max_steps=4").exit_code, 0);
  for (const char* stale : {"model_ema.pt", "model_ema.safetensors", "model_scripted.pt"})
    write_file(plain + "/" + stale, "an earlier run's");
  r = ckpt_train(cfg, "--job.out_dir=" + plain + " --training.max_steps=6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* stale : {"model_ema.pt", "model_ema.safetensors", "model_scripted.pt"})
    EXPECT_FALSE(fs::exists(plain + "/" + stale)) << stale;
  for (const char* kept : {"model.pt", "model.safetensors", "config.json"}) EXPECT_TRUE(fs::exists(plain + "/" + kept));
}

// The folder's fsync after a checkpoint's rename fails (EIO): the rename may not be on the disk, so the save fails
// (on_error = fail: one error line naming the file) before retention deletes anything (keep_last = 1 would delete
// steps 4 and 8 once step 12 is saved).
TEST(CheckpointFaults, AFailedFsyncOfTheFolderFailsTheSaveBeforeRetentionDeletes) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=8").exit_code, 0);
  const std::string ckpts = dir / "o/checkpoints";
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=12 --checkpoint.keep_last=1",
                      fault_env("fsync", "/o/checkpoints$", "eio"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(ckpts + "/step-00000012.pt: fsync of its folder failed: Input/output error"),
            std::string::npos)
      << r.output;
  const CheckpointStore store(ckpts, 1, 0);
  for (const int64_t step : {int64_t{4}, int64_t{8}}) {
    EXPECT_TRUE(fs::exists(store.payload_path(step))) << step;
    EXPECT_TRUE(fs::exists(store.manifest_path(step))) << step;
  }
}

// Whether this process may mount a tmpfs in a mount namespace of its own ("" if so, else why not).
std::string faults_tmpfs_unavailable(const TempDir& dir) {
  auto r = run_command("unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs " + dir.path() + " && umount " + dir.path() +
                       "' 2>&1");
  return r.exit_code == 0 ? "" : "cannot mount a tmpfs in a private mount namespace (needs root): " + r.output;
}

TEST(CheckpointFaults, RealFullAndReadOnlyTmpfs) {
  TempDir dir;
  if (std::string why = faults_tmpfs_unavailable(dir); !why.empty()) GTEST_SKIP() << why;
  const std::string cfg = ckpt_job_config(dir) + " --training.epochs=1";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "full").exit_code, 0);
  const auto checkpoint_bytes = fs::file_size(dir / "full/checkpoints/step-00000020.pt");
  // Room for the metrics and two checkpoints, not a third: the write at step 12 meets a full disk. Then the same
  // folder, remounted read-only, is resumed. Each run's output and the folder's state are copied out of the namespace.
  const std::string mnt = dir / "mnt", size = std::to_string(checkpoint_bytes * 5 / 2 + 64 * 1024);
  fs::create_directories(mnt);
  const std::string run = "OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " --job.out_dir=" + mnt + "/o";
  auto r = run_command("unshare -m bash -c 'mount -t tmpfs -o size=" + size + " tmpfs " + mnt + " && " + run + " > " +
                       dir / "full_disk.log" + " 2>&1; echo rc $?; cp -a " + mnt + "/o " + dir / "after_full" +
                       " && mount -o remount,ro " + mnt + " && " + run + " > " + dir / "read_only.log" +
                       " 2>&1; echo rc $?; cp -a " + mnt + "/o " + dir / "after_ro" + "'");
  ASSERT_NE(r.output.find("rc 1\nrc 1"), std::string::npos) << r.output << read_file(dir / "full_disk.log");
  const std::string full_disk = read_file(dir / "full_disk.log"), read_only = read_file(dir / "read_only.log");
  EXPECT_NE(full_disk.find("error: checkpoint at step 12 failed: " + mnt + "/o/checkpoints/step-00000012.pt"),
            std::string::npos)
      << full_disk;
  EXPECT_NE(full_disk.find("No space left on device (earlier checkpoints are intact)"), std::string::npos) << full_disk;
  EXPECT_NE(read_only.find("Read-only file system"), std::string::npos) << read_only;
  EXPECT_NE(read_only.find("error: "), std::string::npos) << read_only;
  // Nothing lost or half-written; the read-only run changed nothing.
  CheckpointStore store(dir / "after_full/checkpoints", 3, 0);
  auto all = store.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 8);
  for (const auto& c : all) EXPECT_EQ(CheckpointStore::verify(c), "");
  EXPECT_EQ(faults_debris(dir / "after_full/checkpoints"), std::vector<std::string>{});
  for (const auto& c : all)
    EXPECT_TRUE(
        ckpt_same_bytes(c.payload_path, dir / "after_ro/checkpoints/" + fs::path(c.payload_path).filename().string()));
  // Given room again, the run continues from step 8 and ends bit-identical.
  auto resumed = ckpt_train(cfg, "--job.out_dir=" + dir / "after_full");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 8"), std::string::npos) << resumed.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "after_full/model.pt"));
}

}  // namespace
}  // namespace ddp::test
