// How long a run trains: training.max_steps alone trains that many steps across epochs (training.epochs = 0), and
// when both keys are set the summary says which one ended the run.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

// The summary's row `name`: the text after it on its line ("" when absent).
std::string run_length_row(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("\n  " + name + " +([^\n]*)"))) return "";
  return m[1];
}

struct RunLengthCase {
  std::vector<std::string> keys;
  std::string epochs_and_steps, ended_by, progress;
};

// 64 training samples in batches of 8: 8 steps per epoch.
TEST(RunLength, MaxStepsAloneOrWithEpochs) {
  const std::vector<RunLengthCase> cases = {
      {{"training.max_steps=10"}, "1 / 10", "", "epoch 2/2"},
      {{"training.max_steps=16"}, "2 / 16", "", "epoch 2/2"},
      {{"training.max_steps=10", "training.epochs=5"},
       "1 / 10",
       "training.max_steps = 10 (in epoch 2 of training.epochs = 5)",
       "epoch 2/5"},
      {{"training.max_steps=100", "training.epochs=1"},
       "1 / 8",
       "training.epochs = 1 (at step 8 of training.max_steps = 100)",
       "epoch 1/1"},
      {{"training.max_steps=16", "training.epochs=2"},
       "2 / 16",
       "training.epochs = 2 and training.max_steps = 16 together",
       "epoch 2/2"},
      {{}, "1 / 8", "", "epoch 1/1"},
  };
  for (const RunLengthCase& c : cases) {
    TempDir dir;
    std::vector<std::string> keys = {"data.batch_size=8",
                                     "data.workers=0",
                                     "job.out_dir=" + dir / "out",
                                     "metrics.progress=plain",
                                     "metrics.log_every_steps=1",
                                     "checkpoint.every_steps=0",
                                     "job.threads=1"};
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    const std::string cfg = write_tiny_job(dir, 64, 16, 3, keys);
    const CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + shell_quote(cfg));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string what = c.keys.empty() ? "defaults" : c.keys.front() + (c.keys.size() > 1 ? " " + c.keys[1] : "");
    EXPECT_EQ(run_length_row(r.output, "epochs done / steps"), c.epochs_and_steps) << what << "\n" << r.output;
    EXPECT_EQ(run_length_row(r.output, "ended by"), c.ended_by) << what << "\n" << r.output;
    EXPECT_NE(r.output.find(c.progress), std::string::npos) << what << "\n" << r.output;
  }
}

TEST(RunLength, EpochsZeroNeedsMaxSteps) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 16, 8, 3, {"training.epochs=0"});
  const CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + shell_quote(cfg));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("training.epochs = 0 trains until training.max_steps"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
