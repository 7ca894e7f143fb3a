// training.ema_decay: the averaged weights and buffers equal torch.optim.swa_utils.AveragedModel's (EMA, buffers
// included) on two ranks of Python DDP, are evaluated beside the raw ones and saved as model_ema.pt. (A resumed run
// continues the average bit for bit: tests/models/torchscript_test.cpp.)
#include "tests/report/metrics_fields.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

namespace ddp::test {
namespace {

std::string ema_script() { return source_dir() + "/tests/python/torchscript_reference.py"; }

// A scripted residual CNN with BatchNorm (whose num_batches_tracked takes AveragedModel's integer path).
void ema_make_module(const std::string& path) {
  const CommandResult r = run_command(python() + " " + ema_script() + " make " + path + " --seed 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(Ema, TwoRanksMatchAveragedModelOfPythonDdp) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 400, 32, 5);
  ema_make_module(dir / "net.pt");
  const CommandResult ref = run_python_ranks(
      2, ema_script() + " train --data " + dir / "data" + " --init " + dir / "net.pt" + " --out " + dir / "python.pt" +
             " --batch 16 --steps 12 --lr 0.05 --momentum 0.9 --seed 3 --ema-decay 0.75 --ema-out " +
             dir / "python_ema.pt");
  ASSERT_TRUE(std::filesystem::exists(dir / "python_ema.pt")) << ref.output;
  const std::string cfg = write_mnist_job(
      dir, dir / "data",
      {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.batch_size=16", "data.workers=0",
       "optimizer.lr=0.05", "optimizer.momentum=0.9", "job.seed=3", "job.out_dir=" + dir / "out",
       "training.ema_decay=0.75", "training.max_steps=12", "training.epochs=5", "metrics.progress=plain"});
  const auto ranks = run_ranks(2, cfg);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "out/model.pt", dir / "python.pt"), 0.0);
  EXPECT_EQ(max_state_diff(dir / "out/model_ema.pt", dir / "python_ema.pt"), 0.0);
  EXPECT_GT(max_state_diff(dir / "out/model_ema.pt", dir / "out/model.pt"), 1e-4);  // an average, not a copy
  EXPECT_NE(ranks[0].output.find("| EMA accuracy "), std::string::npos) << ranks[0].output;
  EXPECT_NE(ranks[0].output.find("final eval EMA"), std::string::npos) << ranks[0].output;
  const double accuracy_ema = last_eval_value(dir / "out/metrics.jsonl", "accuracy_ema");
  EXPECT_GE(accuracy_ema, 0.0);
  RunConditions run;
  run.multi_rank = run.ema = run.more_than_five_classes = true;
  const auto records = expect_records_as_the_table_says(dir / "out/metrics.jsonl", run);
  EXPECT_GT(records.first, 0);
  EXPECT_GT(records.second, 0);
}

// training.ema_every_steps and ema_adjust with a LinearLR warmup, as torchvision's reference train.py runs them: the
// EMA updated at the first step of each epoch and every third after it, restarted during the warmup, with the decay
// adjusted for world size, batch, update interval and epochs; the warmup's learning rates those of LinearLR(0.1).
TEST(Ema, EveryStepsAndReferenceAdjustmentMatchPythonDdp) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 200, 32, 5);  // 100 per rank: 7 batches of 16 per epoch, 12 steps span two epochs
  ema_make_module(dir / "net.pt");
  const CommandResult ref = run_python_ranks(
      2, ema_script() + " train --data " + dir / "data" + " --init " + dir / "net.pt" + " --out " + dir / "python.pt" +
             " --batch 16 --steps 12 --lr 0.05 --momentum 0.9 --seed 3 --ema-decay 0.99 --ema-steps 3 "
             "--ema-restart-through 4 --ema-adjust-epochs 5 --warmup-steps 4 --warmup-start-factor 0.1 --ema-out " +
             dir / "python_ema.pt");
  ASSERT_TRUE(std::filesystem::exists(dir / "python_ema.pt")) << ref.output;
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.batch_size=16", "data.workers=0",
                       "optimizer.lr=0.05", "optimizer.momentum=0.9", "job.seed=3", "job.out_dir=" + dir / "out",
                       "lr_scheduler.warmup_steps=4", "lr_scheduler.warmup_start_factor=0.1", "training.ema_decay=0.99",
                       "training.ema_every_steps=3", "training.ema_adjust=true", "training.max_steps=12",
                       "training.epochs=5", "metrics.progress=plain"});
  const auto ranks = run_ranks(2, cfg);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "out/model.pt", dir / "python.pt"), 0.0);
  EXPECT_EQ(max_state_diff(dir / "out/model_ema.pt", dir / "python_ema.pt"), 0.0);
  EXPECT_GT(max_state_diff(dir / "out/model_ema.pt", dir / "out/model.pt"), 1e-4);  // an average, not a copy
  // 1 - min(1, 0.01 x 2 ranks x 16 x 3 / 5 epochs)
  EXPECT_NE(ranks[0].output.find("EMA decay 0.808 "), std::string::npos) << ranks[0].output;
}

// Each rank averages its own BatchNorm statistics; the average saved (model_ema.pt) is rank 0's, and the EMA accuracy
// and loss two ranks report are that model's: evaluated alone on one rank (--eval-only from model_ema.pt) it scores the
// same (the loss to the rounding of another summation order).
TEST(Ema, TheReportedAverageIsTheSavedOne) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 400, 32, 5);
  ema_make_module(dir / "net.pt");
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.batch_size=16", "data.workers=0",
                       "optimizer.lr=0.05", "optimizer.momentum=0.9", "job.seed=3", "training.ema_decay=0.75",
                       "training.max_steps=12", "training.epochs=5", "metrics.progress=plain"});
  for (const auto& r : run_ranks(2, cfg + " --job.out_dir=" + dir / "two")) ASSERT_EQ(r.exit_code, 0) << r.output;
  const CommandResult alone = run_command(ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "alone" +
                                          " --eval-only --model.init_from=" + dir / "two/model_ema.pt");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const double loss_ema = last_eval_value(dir / "two/metrics.jsonl", "loss_ema");
  const double loss = last_eval_value(dir / "alone/metrics.jsonl", "loss");
  std::cout << "[ figures ] EMA loss of two ranks " << loss_ema << ", of model_ema.pt alone " << loss << "\n";
  EXPECT_EQ(last_eval_value(dir / "two/metrics.jsonl", "accuracy_ema"),
            last_eval_value(dir / "alone/metrics.jsonl", "accuracy"));
  EXPECT_NEAR(loss_ema, loss, 1e-6 * loss);
}

// An adjusted average inside the learning rate's warmup copies the weights at each update, and every evaluation
// evaluates that copy (torchvision's train.py evaluates model_ema every epoch); with gradient accumulation an update
// comes every grad_accum_steps x ema_every_steps micro-batches, which the adjusted decay counts:
// 1 - min(1, 0.01 x 1 rank x 16 x 2 x 3 / 2 epochs) = 0.52 (without accumulation's factor 0.76).
TEST(Ema, AnAdjustedAverageCountsAccumulationAndIsEvaluatedDuringTheWarmup) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 200, 32, 5);
  const std::string cfg = write_mnist_job(
      dir, dir / "data",
      {"data.batch_size=16", "data.workers=0", "job.out_dir=" + dir / "out", "training.grad_accum_steps=2",
       "lr_scheduler.warmup_steps=100", "training.ema_decay=0.99", "training.ema_every_steps=3",
       "training.ema_adjust=true", "training.epochs=2", "metrics.progress=plain"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("EMA decay 0.52 "), std::string::npos) << r.output;
  int evals = 0;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.value("kind", "") != "eval") continue;
    ++evals;
    EXPECT_TRUE(record.contains("accuracy_ema")) << line;
  }
  EXPECT_EQ(evals, 2);  // after each epoch, both inside the warmup's 100 steps
}

}  // namespace
}  // namespace ddp::test
