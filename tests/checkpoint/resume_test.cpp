// Exact resume from checkpoints, retention, fallbacks and preemption.
//
// (run to N) == (run to k, stop, resume to N) bit for bit, mid-epoch and at an epoch boundary, on 1 and 2 ranks,
// with dropout, gradient accumulation, DDP's static_graph and several param groups; corrupt newest checkpoint falls
// back; retention; a failed write keeps earlier checkpoints; a different model is refused; preemption by SIGTERM
// resumes exactly.
#include "checkpoint/checkpoint_store.h"
#include "tests/checkpoint/resume_job.h"

#include <gtest/gtest.h>

#include <iostream>
#include <regex>
#include <sstream>

#include <filesystem>
#include <fstream>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

struct Case {
  int world;
  int stop_at;  // optimizer steps of the interrupted run
  int accum;
  bool amp = false;           // bf16 autocast + dynamic loss scaling (scaler state must resume too)
  bool static_graph = false;  // DDP's static_graph: the resumed run's first step all-reduces at the end of backward
  // torch.optim.Adam with L2 weight decay over set_weight_decay's param groups (optimizer.bias_weight_decay: biases
  // without it): step counts and moments must resume too, group by group.
  bool adam = false;
  // Gloo's ring all-reduce: each element's sum order follows the bucket layout, which the Reducer rebuilds after the
  // first step; a resumed run must reduce in the rebuilt layout too (more than 2 ranks: 3 or more addends).
  bool gloo = false;
  // dist.grad_compression = "powersgd" from step 3: the hook's step count, Q memories, generator and every rank's
  // error-feedback residuals must resume too.
  bool powersgd = false;
};

class ExactResume : public ::testing::TestWithParam<Case> {};

TEST_P(ExactResume, InterruptedRunEqualsUninterruptedBitForBit) {
  const Case c = GetParam();
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  std::string common = " --training.grad_accum_steps=" + std::to_string(c.accum);
  if (c.static_graph) common += " --dist.static_graph=true";
  if (c.gloo) common += " --dist.allreduce=gloo";
  if (c.powersgd) common += " --dist.grad_compression=powersgd --dist.powersgd_rank=2 --dist.powersgd_start_step=3";
  if (c.adam)
    common +=
        " --optimizer.name=adam --optimizer.lr=0.002 --optimizer.weight_decay=0.01 --optimizer.bias_weight_decay=0";
  // A non-power-of-two growth factor makes unscaling round, so the weights depend on the exact scale and
  // growth tracker being restored; fp16 autocast with a scale that grows every 3 steps overflows again and again
  // (skipped steps and backoffs before and after the stop point).
  const std::string env;
  if (c.amp) {
    common +=
        " --amp.enabled=true --amp.dtype=float16 --amp.loss_scaling=dynamic --amp.init_scale=65536"
        " --amp.growth_factor=3 --amp.growth_interval=3 --metrics.log_every_steps=1";
  }
  auto run = [&](const std::string& args) {
    if (c.world == 1) {
      auto r = run_command(env + "OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " " + common + args);
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return r.output;
    }
    auto rs = run_ranks(c.world, cfg + common + args, env);
    for (auto& r : rs) EXPECT_EQ(r.exit_code, 0) << r.output;
    return rs[0].output;
  };
  run(" --job.out_dir=" + dir / "full");
  run(" --job.out_dir=" + dir / "part --training.max_steps=" + std::to_string(c.stop_at));
  std::string out = run(" --job.out_dir=" + dir / "part");
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_NE(out.find("at step " + std::to_string(c.stop_at)), std::string::npos) << out;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"))
      << "max diff " << max_state_diff(dir / "full/model.pt", dir / "part/model.pt");
  if (c.amp) {
    // Skipped steps (cumulative) by step, from the uninterrupted run: some after the stop point.
    const std::string metrics = read_file(dir / "full/metrics.jsonl");
    const std::regex train_record("\"kind\":\"train\",\"step\":([0-9]+),.*\"skipped_steps\":([0-9]+)");
    int64_t at_stop = -1, at_end = -1;
    std::istringstream lines(metrics);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, train_record)) continue;
      if (std::stoll(m[1]) <= c.stop_at) at_stop = std::stoll(m[2]);
      at_end = std::stoll(m[2]);
    }
    EXPECT_GE(at_stop, 0) << metrics;
    EXPECT_GT(at_end, at_stop) << "the AMP case should skip steps after the stop point:\n" << metrics;
  }
}

// 1 rank: 20 steps/epoch (10 with accumulation 2); 2 ranks: 10 (5); 4 ranks: 5. Mid-epoch and epoch-boundary stops;
// a stop after the first step, before the Reducer's bucket rebuild.
INSTANTIATE_TEST_SUITE_P(
    Checkpoint, ExactResume,
    ::testing::Values(Case{1, 7, 1}, Case{1, 20, 1}, Case{1, 13, 2}, Case{2, 7, 1}, Case{2, 10, 1}, Case{2, 7, 2},
                      Case{1, 11, 2, true}, Case{2, 7, 2, true}, Case{2, 7, 1, false, true},
                      Case{1, 7, 1, false, false, true}, Case{4, 3, 1, false, false, false, true},
                      Case{4, 1, 1, false, false, false, true}, Case{2, 7, 1, false, false, false, false, true},
                      Case{3, 2, 1, false, false, false, true, true}, Case{3, 5, 2, false, false, false, true, true}),
    [](const auto& info) {
      return "world" + std::to_string(info.param.world) + "_stop" + std::to_string(info.param.stop_at) + "_accum" +
             std::to_string(info.param.accum) + (info.param.amp ? "_amp" : "") +
             (info.param.static_graph ? "_static_graph" : "") + (info.param.adam ? "_adam" : "") +
             (info.param.gloo ? "_gloo" : "") + (info.param.powersgd ? "_powersgd" : "");
    });

// The config of a PowerSGD job (compressed from step 3) after its first 6 steps on 2 ranks, checkpointed in dir/o.
std::string powersgd_checkpointed_job(const TempDir& dir) {
  const std::string cfg = ckpt_job_config(dir) +
                          " --dist.grad_compression=powersgd --dist.powersgd_start_step=3 --job.out_dir=" + dir / "o";
  for (auto& r : run_ranks(2, cfg + " --training.max_steps=6")) EXPECT_EQ(r.exit_code, 0) << r.output;
  return cfg;
}

// Rank 0's output of `cfg` resumed on `ranks` ranks with `args`, every rank ending well.
std::string resumed_output(const std::string& cfg, int ranks, const std::string& args) {
  const auto run = run_ranks(ranks, cfg + " " + args);
  for (auto& r : run) EXPECT_EQ(r.exit_code, 0) << r.output;
  return run.at(0).output;
}

// A PowerSGD checkpoint of 2 ranks resumed on 3: the residuals are each rank's own, so they restart from zero, and the
// run says so; the rest of the hook's state carries on.
TEST(Checkpoint, PowerSgdResumedOnAnotherWorldSizeSaysItResetsTheResiduals) {
  TempDir dir;
  const std::string cfg = powersgd_checkpointed_job(dir);
  const std::string three = resumed_output(cfg, 3, "--training.max_steps=8");
  EXPECT_NE(three.find("PowerSGD: the checkpoint holds the error-feedback residuals of 2 ranks and this run has 3: "
                       "every rank's residuals start from zero"),
            std::string::npos)
      << three;
}

// A PowerSGD checkpoint resumed with another rank: the warm-start Q memories no longer fit the buckets' factors, so
// those buckets draw new Qs as at their first compressed step, and the run says which settings changed.
TEST(Checkpoint, PowerSgdResumedWithAnotherRankDrawsNewQsAndSaysSo) {
  TempDir dir;
  const std::string cfg = powersgd_checkpointed_job(dir);
  const std::string resumed = resumed_output(cfg, 2, "--training.max_steps=8 --dist.powersgd_rank=3");
  EXPECT_NE(resumed.find("PowerSGD: the checkpoint was written with other settings (dist.powersgd_rank 1 -> 3): each "
                         "bucket whose P and Q matrices change size starts from random Qs"),
            std::string::npos)
      << resumed;
  // Resumed with the settings it was written with, the run has nothing to say of them.
  const std::string same = resumed_output(cfg, 2, "--training.max_steps=10 --dist.powersgd_rank=3");
  EXPECT_EQ(same.find("PowerSGD: the checkpoint"), std::string::npos) << same;
}

// A multi-rank checkpoint carries DDP's rebuilt buckets (ddp_buckets: every trainable parameter's index once); an entry
// that is no such layout stops the resume with one error naming it.
TEST(Checkpoint, DdpBucketsEntryIsTheRebuiltLayoutAndAMalformedOneIsRefused) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  for (auto& r : run_ranks(2, cfg + " --job.out_dir=" + dir / "part --training.max_steps=4"))
    ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = dir / "part/checkpoints/step-00000004.pt";
  const auto edit = [&](const std::string& statement, const std::string& out) {
    const auto e = run_command(
        python() + " -c " +
        shell_quote("import torch; d = torch.load('" + ckpt + "'); " + statement + "; torch.save(d, '" + out + "')"));
    EXPECT_EQ(e.exit_code, 0) << e.output;
  };
  const auto layout =
      run_command(python() + " -c " +
                  shell_quote("import torch; d = torch.load('" + ckpt +
                              "'); b = d['ddp_buckets']; "
                              "n = sum(1 for k in d['model'] if not k.endswith(('running_mean', 'running_var', "
                              "'num_batches_tracked'))); print(sorted(i for x in b for i in x) == list(range(n)), n)"));
  ASSERT_EQ(layout.exit_code, 0) << layout.output;
  EXPECT_EQ(layout.output.substr(0, 5), "True ") << layout.output;
  edit("d['ddp_buckets'][0].append(d['ddp_buckets'][0][0])", dir / "twice.pt");
  edit("d['ddp_buckets'] = 'one'", dir / "str.pt");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"twice.pt", "checkpoint entry \"ddp_buckets\": parameter "},
      {"str.pt", "checkpoint entry \"ddp_buckets\": not a list of buckets but a String"}};
  for (const auto& [file, message] : cases) {
    SCOPED_TRACE(file);
    auto rs = run_ranks(2, cfg + " --job.out_dir=" + dir / "o" + " --checkpoint.resume=" + dir / file);
    EXPECT_NE(rs[0].exit_code, 0) << rs[0].output;
    EXPECT_NE(rs[0].output.find(message), std::string::npos) << rs[0].output;
    EXPECT_FALSE(fs::exists(dir / "o/model.pt"));
  }
}

TEST(Checkpoint, DifferentWorldSizeResumesFromTheSavedPositionInTheGlobalOrder) {
  // 2 ranks x 16 stopped mid-epoch, resumed on 1 rank x 32: the global sample order continues where it
  // stopped, so the result equals the uninterrupted 2 x 16 run up to float reassociation (dropout off).
  TempDir dir;
  std::string cfg = ckpt_job_config(dir) + " --model.dropout=0.0";
  auto full = run_ranks(2, cfg + " --job.out_dir=" + dir / "full");
  for (auto& r : full) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto part = run_ranks(2, cfg + " --job.out_dir=" + dir / "part --training.max_steps=7");
  for (auto& r : part) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part --data.batch_size=32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: checkpoint was written by 2 rank(s) x batch 16, resuming on 1 x 32: epoch 1 "
                          "continues from sample 224"),
            std::string::npos)
      << r.output;
  // Reference for float reassociation alone: the uninterrupted 1 x 32 run against the 2 x 16 run.
  auto single = ckpt_train(cfg, "--job.out_dir=" + dir / "single --data.batch_size=32");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  // The resumed run takes the first steps as the full run does, bit for bit (the checkpoint is exact), and the rest
  // as the single run does: the same sums as the full run's in another order (one batch of 32 against two of 16
  // summed over the ranks). So it differs from the full run by what that reassociation does over fewer steps than the
  // single run's, which measures it; a factor 3 for how unevenly rounding grows from step to step, and a floor of
  // 1e-5 (about 170 float32 units of weights below 1) for when the two orders agree to the last bits. A resume at a
  // wrong position trains on other batches: a difference of what a step moves the weights, not of their last bits.
  const double reassociation = max_state_diff(dir / "full/model.pt", dir / "single/model.pt");
  const double resumed_diff = max_state_diff(dir / "full/model.pt", dir / "part/model.pt");
  EXPECT_LE(resumed_diff, std::max(1e-5, 3 * reassociation));
  EXPECT_LT(reassociation, 1e-3);
  std::cout << "[ measured ] max |resumed - full| " << resumed_diff << ", max |single - full| " << reassociation
            << "\n";
}

// Resumed on a world that does not divide the rest of the epoch, every rank still trains as many batches (a rank
// with one more would take a step, and a gradient all-reduce, that the others do not): 1 rank x 16 stopped after 3
// steps (48 of 320 samples), resumed on 5 ranks x 6: the 272 left, each once and 54 or 55 a rank, would leave ranks
// 2-4 without a tenth batch (its 2 samples on ranks 0 and 1); padded with three from the order's start, every rank
// trains 10.
TEST(Checkpoint, AWorldThatDoesNotDivideTheRestOfTheEpochGivesEveryRankAsManyBatches) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --dist.timeout_s=60";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=3").exit_code, 0);
  auto ranks = run_ranks(5, cfg + " --job.out_dir=" + dir / "o --data.batch_size=6 --training.epochs=1");
  for (auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("resuming on 5 x 6: epoch 1 continues from sample 48 of the global order"),
            std::string::npos)
      << ranks[0].output;
  const auto saved = CheckpointStore(dir / "o/checkpoints", 3, 0).list();
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(saved[0].step, 13);  // 3 steps, then the epoch's 10
}

// A checkpoint without the epoch position (as Python may write one) is placed by its global_step in the epochs of the
// world and batch size it names: 2 ranks x 16 take 10 steps an epoch, so step 13 is 3 steps into the second epoch,
// sample 96 of its order, whatever world resumes it (1 x 16 takes 20 steps an epoch).
TEST(Checkpoint, APositionDerivedFromTheStepCountsTheWritingRunsEpochs) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  for (auto& r : run_ranks(2, cfg + " --job.out_dir=" + dir / "part --training.max_steps=13"))
    ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string from = dir / "no_position.pt";
  const auto edit =
      run_command(python() + " -c " +
                  shell_quote("import torch; d = torch.load('" + dir / "part/checkpoints/step-00000013.pt" +
                              "', weights_only=False)\nfor k in ('epoch', 'batch_in_epoch', 'epoch_sample_offset', "
                              "'epoch_order_world'): del d[k]\ntorch.save(d, '" +
                              from + "')"));
  ASSERT_EQ(edit.exit_code, 0) << edit.output;
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=14 --checkpoint.resume=" + from);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: checkpoint was written by 2 rank(s) x batch 16, resuming on 1 x 16: epoch 2 "
                          "continues from sample 96 of the global order"),
            std::string::npos)
      << r.output;
}

TEST(Checkpoint, KeepBestKeepsTheBestEvaluatedBesidesTheNewest) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(
      ckpt_train(cfg, "--job.out_dir=" + dir / "o --checkpoint.every_steps=0 --checkpoint.every_epochs=1 "
                                               "--checkpoint.keep_last=1 --checkpoint.keep_best=1 --training.epochs=4")
          .exit_code,
      0);
  CheckpointStore store(dir / "o/checkpoints", 1, 1);
  auto all = store.list();
  ASSERT_GE(all.size(), 1u);
  ASSERT_LE(all.size(), 2u);
  EXPECT_EQ(all[0].step, 80);  // newest
  // The other one (if the newest is not also the best) has the highest accuracy of all epochs.
  double best = -1;
  for (const auto& line : read_lines(dir / "o/metrics.jsonl")) {
    auto p = line.find("\"kind\":\"eval\"");
    if (p == std::string::npos) continue;
    auto a = line.find("\"accuracy\":");
    best = std::max(best, std::stod(line.substr(a + 11)));
  }
  double kept_best = -1;
  for (const auto& c : all) kept_best = std::max(kept_best, c.eval_accuracy);
  EXPECT_DOUBLE_EQ(kept_best, best);
}

TEST(Checkpoint, ResumeFromAnExplicitPathAndNever) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "full").exit_code, 0);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=12").exit_code, 0);
  // An explicit older checkpoint (step 8), from another folder, continues exactly too.
  auto r = ckpt_train(
      cfg, "--job.out_dir=" + dir / "other --checkpoint.resume=" + dir / "part/checkpoints/step-00000008.pt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "other/model.pt"));
  // never: a fresh start although checkpoints exist.
  auto fresh = ckpt_train(cfg, "--job.out_dir=" + dir / "part --checkpoint.resume=never --training.max_steps=2");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_EQ(fresh.output.find("resumed from"), std::string::npos) << fresh.output;
  // A missing path is an error naming it.
  auto missing = ckpt_train(cfg, "--job.out_dir=" + dir / "x --checkpoint.resume=" + dir / "nope.pt");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find(dir / "nope.pt"), std::string::npos) << missing.output;
}

TEST(Checkpoint, SecondSignalExitsImmediately) {
  TempDir dir;
  write_tiny_job(dir, 4000, 32, 13,
                 {"job.out_dir=" + dir / "o", "data.batch_size=256", "model.name=resnet18", "training.epochs=50",
                  "checkpoint.every_steps=100000", "metrics.log_every_steps=1"});
  // Two signals inside one (slow) step: the second exits with 128 + SIGTERM before any checkpoint.
  auto r = run_command(
      ddptrain_path() + " " + dir / "cfg.toml" + " > " + dir / "log" + " 2>&1 & p=$!; " +
      "for i in $(seq 300); do grep -q 'step 1/' " + dir / "log" +
      " 2>/dev/null && break; sleep 0.1; done; kill -TERM $p; sleep 0.05; kill -TERM $p; wait $p; echo rc $?");
  EXPECT_NE(r.output.find("rc 143"), std::string::npos) << r.output << read_file(dir / "log");
  EXPECT_NE(read_file(dir / "log").find("second signal received"), std::string::npos) << read_file(dir / "log");
}

TEST(Checkpoint, CorruptNewestFallsBackToPreviousAndStillMatches) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "full").exit_code, 0);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=10").exit_code, 0);
  // The newest (step 10) loses its tail: its CRC no longer matches its manifest.
  const std::string newest = dir / "part/checkpoints/step-00000010.pt";
  fs::resize_file(newest, fs::file_size(newest) / 2);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping corrupt checkpoint: " + newest), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
}

TEST(Checkpoint, RetentionKeepsLastNCompleteOnes) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=22").exit_code, 0);
  CheckpointStore store(dir / "o/checkpoints", 3, 0);
  auto all = store.list();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].step, 22);  // final state
  EXPECT_EQ(all[1].step, 20);
  EXPECT_EQ(all[2].step, 16);
  for (const auto& c : all) EXPECT_EQ(CheckpointStore::verify(c), "");
  EXPECT_FALSE(fs::exists(dir / "o/checkpoints/step-00000012.pt"));
}

TEST(Checkpoint, FailedWriteKeepsEarlierCheckpointsAndSaysSo) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  // The write of step 12's payload fails like a full disk (the fault shim, not a hook in ddptrain).
  const std::string full_disk = fault_env("write", "step-00000012.pt.tmp-", "enospc");
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "o", full_disk);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: checkpoint at step 12 failed: " + dir / "o/checkpoints/step-00000012.pt" +
                          ": write failed: No space left on device (earlier checkpoints are intact)"),
            std::string::npos)
      << r.output;
  CheckpointStore store(dir / "o/checkpoints", 3, 0);
  auto all = store.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 8);
  EXPECT_EQ(CheckpointStore::verify(all[0]), "");
  EXPECT_EQ(CheckpointStore::verify(all[1]), "");
  for (const auto& e : fs::directory_iterator(dir / "o/checkpoints"))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  // on_error = warn keeps training.
  auto w = ckpt_train(cfg, "--job.out_dir=" + dir / "w --checkpoint.on_error=warn --training.max_steps=14", full_disk);
  EXPECT_EQ(w.exit_code, 0) << w.output;
  EXPECT_NE(w.output.find("warning: checkpoint at step 12 failed"), std::string::npos) << w.output;
}

TEST(Checkpoint, DifferentModelIsRefusedListingKeys) {
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=4").exit_code, 0);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "o --model.name=resnet18");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("state dict does not match the model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing keys: bn1.weight, bn1.bias"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shape mismatch: conv1.weight (file [10, 1, 5, 5], model [64, 1, 7, 7])"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("unexpected keys:"), std::string::npos) << r.output;
}

// A resume warns when the config differs from the checkpoint's, and not when the checkpoint's snapshot only spells
// the same values another way (written before choices were enums, it kept amp.dtype = "bf16" as given; its hash is
// then of that text).
TEST(Checkpoint, ConfigWarningComparesMeaningNotSpelling) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir);
  const std::string amp = " --amp.enabled=true --amp.dtype=bf16";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "a --training.max_steps=4" + amp).exit_code, 0);
  const std::string ckpt = dir / "a/checkpoints/step-00000004.pt";
  const std::string warning = "warning: the config differs from the one the checkpoint was written with";
  auto resume_from = [&](const std::string& path, const std::string& out, const std::string& args) {
    auto r = ckpt_train(
        cfg, "--job.out_dir=" + dir / out + " --training.max_steps=5 --checkpoint.resume=" + path + amp + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  EXPECT_EQ(resume_from(ckpt, "same", "").find(warning), std::string::npos);
  EXPECT_NE(resume_from(ckpt, "other", " --optimizer.lr=0.02").find(warning), std::string::npos);

  auto rewrite = [&](const std::string& out, const std::string& change) {
    const std::string code =
        "import sys, torch\n"
        "d = torch.load(sys.argv[1], weights_only=True)\n"
        "assert 'dtype = \"bfloat16\"' in d['config'], d['config']\n"
        "d['config_hash'] = '0123456789abcdef'\n" +
        change + "torch.save(d, sys.argv[2])\n";
    auto r = run_command(python() + " -c " + shell_quote(code) + " " + ckpt + " " + dir / out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return dir / out;
  };
  const std::string older = rewrite("older.pt", "d['config'] = d['config'].replace('\"bfloat16\"', '\"bf16\"')\n");
  EXPECT_EQ(resume_from(older, "older", "").find(warning), std::string::npos);
  const std::string unreadable = rewrite("unreadable.pt", "d['config'] = '[not toml'\n");
  EXPECT_NE(resume_from(unreadable, "unreadable", "").find(warning), std::string::npos);
}

TEST(Checkpoint, ReadableFromPython) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "o --training.max_steps=4").exit_code, 0);
  auto r = run_command(python() + " -c \"import torch; d = torch.load('" + dir / "o/checkpoints/step-00000004.pt" +
                       "'); print(sorted(d.keys())); print(d['global_step'], d['epoch'], d['batch_in_epoch'], "
                       "d['world_size'], len(d['rng_cpu']), d['model']['fc2.bias'].shape, d['format_version'], "
                       "sorted(d['optimizer']), sorted(d['optimizer']['state']), list(d['optimizer']['state'][7]))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(
                "'batch_in_epoch', 'batch_size', 'best_accuracy', 'config', 'config_hash', 'epoch', "
                "'epoch_order_world', 'epoch_sample_offset', 'format_version', 'global_step', 'model', 'optimizer', "
                "'optimizer_name', 'rng_cpu', 'rng_cuda', 'scaler', 'world_size'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(
                "4 0 4 1 1 torch.Size([10]) 2 ['param_groups', 'state'] [0, 1, 2, 3, 4, 5, 6, 7] ['momentum_buffer']"),
            std::string::npos)
      << r.output;
}

// Map location: a checkpoint written on GPU (rng_cuda holds each rank's CUDA generator state, as
// torch.cuda.get_rng_state() gives it) resumes on CPU exactly like the CPU-written one, and so does one of ddptrain
// 0.3.0 that has no rng_cuda entry. The variants are made from a real checkpoint by torch in Python.
TEST(Checkpoint, CheckpointWithCudaGeneratorStatesOrWithoutTheEntryResumesOnCpu) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  std::string cfg = ckpt_job_config(dir);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "full").exit_code, 0);
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=8").exit_code, 0);
  const std::string src = dir / "part/checkpoints/step-00000008.pt";
  auto edit = run_command(python() + " -c \"import torch; d = torch.load('" + src +
                          "'); assert d['rng_cuda'] == [], "
                          "d['rng_cuda']; g = torch.Generator(); g.manual_seed(5); "
                          "d['rng_cuda'] = [g.get_state()[-16:].clone()]; torch.save(d, '" +
                          dir / "gpu.pt" +
                          "'); "
                          "del d['rng_cuda']; torch.save(d, '" +
                          dir / "old.pt" + "')\"");
  ASSERT_EQ(edit.exit_code, 0) << edit.output;
  for (const std::string variant : {"gpu", "old"}) {
    auto r = ckpt_train(cfg, "--job.out_dir=" + dir / variant + " --checkpoint.resume=" + dir / (variant + ".pt"));
    ASSERT_EQ(r.exit_code, 0) << variant << ": " << r.output;
    EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
    EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / (variant + "/model.pt"))) << variant;
  }
}

// A signal to rank 1 once training runs (mid-epoch): every rank stops at the same step after a checkpoint, exits
// `exit_code` and says `said`; the same command then resumes to the uninterrupted run's model.pt, byte for byte.
void expect_signal_stops_all_ranks_and_resumes_exactly(const std::string& signal, int exit_code,
                                                       const std::string& said) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 2000, 32, 13,
      {"job.seed=2", "data.batch_size=8", "model.dropout=0.5", "optimizer.lr=0.02", "optimizer.momentum=0.9",
       "training.epochs=2", "checkpoint.every_epochs=1", "metrics.log_every_steps=5"});
  auto full = run_ranks(2, cfg + " --job.out_dir=" + dir / "full");
  for (auto& r : full) ASSERT_EQ(r.exit_code, 0) << r.output;
  const int port = free_port();
  std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " OMP_NUM_THREADS=1 ";
  std::string args = " " + cfg + " --job.out_dir=" + dir / "part";
  auto r = run_command("RANK=0 " + env + ddptrain_path() + args + " > " + dir / "r0.log" + " 2>&1 & p0=$!; RANK=1 " +
                       env + ddptrain_path() + args + " > " + dir / "r1.log" +
                       " 2>&1 & p1=$!; for i in $(seq 200); do grep -q 'step 10/' " + dir / "r0.log" +
                       " 2>/dev/null && break; sleep 0.1; done; kill -" + signal +
                       " $p1; wait $p0; e0=$?; wait $p1; e1=$?; echo rc $e0 $e1");
  const std::string rc = "rc " + std::to_string(exit_code) + " " + std::to_string(exit_code);
  EXPECT_NE(r.output.find(rc), std::string::npos) << r.output << read_file(dir / "r0.log") << read_file(dir / "r1.log");
  const std::string log0 = read_file(dir / "r0.log");
  ASSERT_NE(log0.find(said), std::string::npos) << log0;
  EXPECT_FALSE(fs::exists(dir / "part/model.pt"));
  auto resumed = run_ranks(2, cfg + " --job.out_dir=" + dir / "part");
  for (auto& rr : resumed) ASSERT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_NE(resumed[0].output.find("resumed from"), std::string::npos) << resumed[0].output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
}

TEST(Checkpoint, SigtermOnOneRankCheckpointsAllAndResumesExactly) {
  expect_signal_stops_all_ranks_and_resumes_exactly("TERM", 0, "preempted by a signal at step ");
}

// SIGUSR1, a scheduler's warning of its time limit (Slurm's --signal=USR1@90): the same stop, exit 75 (EX_TEMPFAIL)
// on every rank, for a requeue.
TEST(Checkpoint, Sigusr1OnOneRankCheckpointsAllExits75AndResumesExactly) {
  expect_signal_stops_all_ranks_and_resumes_exactly("USR1", 75,
                                                    "stopped for requeue (SIGUSR1: a time limit ahead) at step ");
}

}  // namespace
}  // namespace ddp::test
