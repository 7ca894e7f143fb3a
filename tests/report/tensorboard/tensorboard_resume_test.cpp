// Tests: after a kill -9 mid-run and a resume, TensorBoard (PyPI tensorboard's EventAccumulator) and metrics.jsonl show
// every scalar tag once per step, the resumed run's values kept (the resume writes SummaryWriter(purge_step=...)'s
// START event and drops metrics.jsonl's records past the checkpoint);
// a run continued from a checkpoint written at an epoch's last step does not evaluate that step again.
#include "tests/report/tensorboard/tensorboard_scalars.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace ddp::test {
namespace {

// Train records of metrics.jsonl: step -> samples_per_s of its first and of its last record.
struct TrainRecords {
  std::map<int64_t, double> first, last;
  std::set<int64_t> repeated;  // steps with more than one record
};

// TensorBoard's scalars of LOGDIR: tag -> steps, in TensorBoard's order (and perf/samples_per_s by step).
std::map<std::string, std::vector<int64_t>> tensorboard_steps(const std::string& logdir,
                                                              std::map<int64_t, double>* samples_per_s = nullptr) {
  std::map<std::string, std::vector<int64_t>> steps;
  for (const auto& s : read_tensorboard_scalars(logdir)) {
    steps[s.tag].push_back(s.step);
    if (samples_per_s && s.tag == "perf/samples_per_s") (*samples_per_s)[s.step] = s.value;
  }
  return steps;
}

TrainRecords read_train_records(const std::string& path) {
  TrainRecords r;
  const std::regex re("\"kind\":\"train\",\"step\":([0-9]+),.*\"samples_per_s\":([-+0-9.eE]+)");
  for (const auto& line : read_lines(path)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    const int64_t step = std::stoll(m[1]);
    if (r.first.count(step))
      r.repeated.insert(step);
    else
      r.first[step] = std::stod(m[2]);
    r.last[step] = std::stod(m[2]);
  }
  return r;
}

TEST(TensorBoardResume, KillNineThenResumeLeavesNoDuplicatedStepsAndKeepsResumedValues) {
  if (!python_has_modules("tensorboard")) GTEST_SKIP() << python() << " does not have tensorboard";
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 8000, 32, 23,
                     {"job.out_dir=" + dir / "out", "job.threads=1", "data.batch_size=256", "training.epochs=2",
                      "checkpoint.every_steps=10", "checkpoint.dir=" + dir / "ck", "metrics.log_every_steps=1",
                      "metrics.tensorboard=true", "metrics.progress=plain"});
  // kill -9 once a step 2 to 6 past a checkpoint (10, 20, ...) is logged and a checkpoint is written (the background
  // save is serialised at idle priority, so on a busy machine it may end some steps later): those steps become orphans.
  const std::string metrics = shell_quote(dir / "out/metrics.jsonl");
  const CommandResult killed = run_command(
      ddptrain_path() + " " + cfg + " > " + dir / "log1" + " 2>&1 & p=$!; k=0; for i in $(seq 6000); do " +
      "s=$(grep -o '\"kind\":\"train\",\"step\":[0-9]*' " + metrics + " 2>/dev/null | tail -n1 | grep -o '[0-9]*$'); " +
      "if [ -n \"$s\" ] && [ \"$s\" -gt 10 ] && [ $((s % 10)) -ge 2 ] && [ $((s % 10)) -le 6 ] && ls " +
      shell_quote(dir / "ck") + "/step-*.json >/dev/null 2>&1; then " +
      "kill -9 $p; k=$s; break; fi; sleep 0.01; done; wait $p; echo \"rc $? killed at $k\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(killed.output, m, std::regex("rc 137 killed at ([1-9][0-9]*)")))
      << killed.output << read_file(dir / "log1");
  const int64_t killed_at = std::stoll(m[1]);
  std::filesystem::copy_file(dir / "out/metrics.jsonl", dir / "killed.jsonl");

  const CommandResult resumed = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_TRUE(std::regex_search(resumed.output, m, std::regex("resumed from .* at step ([0-9]+)"))) << resumed.output;
  const int64_t resume_step = std::stoll(m[1]);
  ASSERT_LT(resume_step, killed_at);  // the killed run logged steps past its last checkpoint

  // metrics.jsonl drops what the killed run logged after the checkpoint, as TensorBoard does: each step once.
  const TrainRecords records = read_train_records(dir / "out/metrics.jsonl");
  EXPECT_TRUE(records.repeated.empty()) << ::testing::PrintToString(records.repeated);
  const TrainRecords killed_records = read_train_records(dir / "killed.jsonl");
  std::set<int64_t> orphans;  // steps the killed run logged after its checkpoint
  for (const auto& [step, value] : killed_records.last)
    if (step > resume_step) orphans.insert(step);
  ASSERT_FALSE(orphans.empty());
  EXPECT_EQ(*orphans.begin(), resume_step + 1);

  std::map<int64_t, double> samples_per_s;
  auto steps = tensorboard_steps(dir / "out/tensorboard", &samples_per_s);
  ASSERT_TRUE(steps.count("train/loss"));
  for (const auto& [tag, list] : steps)
    for (size_t i = 1; i < list.size(); ++i)
      EXPECT_LT(list[i - 1], list[i]) << tag << ": step " << list[i] << " after " << list[i - 1];
  EXPECT_EQ(steps["train/loss"].size(), records.last.size());  // every train step once
  int differing = 0;
  for (int64_t step : orphans) {
    ASSERT_TRUE(samples_per_s.count(step)) << step;
    ASSERT_TRUE(records.last.count(step)) << step;
    EXPECT_EQ(static_cast<float>(samples_per_s[step]), static_cast<float>(records.last.at(step))) << step;
    differing += static_cast<float>(killed_records.last.at(step)) != static_cast<float>(records.last.at(step));
  }
  EXPECT_GT(differing, 0);  // the killed run's values differ: keeping the resumed ones is what was checked
  std::cout << "killed at step " << killed_at << ", resumed from " << resume_step << ": " << orphans.size()
            << " steps logged before the kill and again after it, " << differing
            << " of them with a different perf/samples_per_s" << std::endl;
}

// checkpoint.every_steps landing on an epoch's last step: that checkpoint is written after the epoch's evaluation,
// so raising training.epochs afterwards continues without evaluating the step again (one eval point per step).
TEST(TensorBoardResume, MoreEpochsAfterAnEpochEndCheckpointEvaluateEachStepOnce) {
  if (!python_has_modules("tensorboard")) GTEST_SKIP() << python() << " does not have tensorboard";
  TempDir dir;
  // 1024 samples, batch 128: 8 steps per epoch; every_steps 4 saves at 4 and at the epoch's last step, 8.
  const std::string cfg =
      write_tiny_job(dir, 1024, 64, 29,
                     {"job.out_dir=" + dir / "out", "job.threads=1", "data.batch_size=128", "training.epochs=1",
                      "checkpoint.every_steps=4", "checkpoint.dir=" + dir / "ck", "metrics.tensorboard=true",
                      "metrics.progress=plain"});
  const CommandResult first = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const CommandResult more = run_command(ddptrain_path() + " " + cfg + " --training.epochs=2");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("at step 8"), std::string::npos) << more.output;  // resumed from the epoch-end save

  const auto steps = tensorboard_steps(dir / "out/tensorboard");
  for (const std::string tag : {"eval/accuracy", "eval/loss"}) {
    ASSERT_TRUE(steps.count(tag)) << tag;
    EXPECT_EQ(steps.at(tag), (std::vector<int64_t>{8, 16})) << tag;
  }
  std::vector<int64_t> eval_records;
  const std::regex re("\"kind\":\"eval\",\"step\":([0-9]+)");
  for (const auto& line : read_lines(dir / "out/metrics.jsonl")) {
    std::smatch m;
    if (std::regex_search(line, m, re)) eval_records.push_back(std::stoll(m[1]));
  }
  EXPECT_EQ(eval_records, (std::vector<int64_t>{8, 16})) << read_file(dir / "out/metrics.jsonl");
}

}  // namespace
}  // namespace ddp::test
