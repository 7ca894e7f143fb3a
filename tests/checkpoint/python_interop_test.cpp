// Checkpoints out and in: ddptrain checkpoints resumed by PyTorch itself, and PyTorch-written ones by ddptrain.
//
// torch.load (weights_only=True) reads a ddptrain checkpoint; Net.load_state_dict (strict), torch.optim.SGD/AdamW
// and torch.amp.GradScaler("cpu") load its entries; M more steps in Python equal ddptrain's M more steps within
// kInteropBound, with one param group or set_weight_decay's several. The reverse: Python's {"model", "optimizer",
// "global_step"} resumes in ddptrain. Format 1 (flat optimizer layout) still resumes exactly. Oracle:
// tests/python/checkpoint_interop.py.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <regex>
#include <tuple>

namespace ddp::test {
namespace {

// Max |weight difference| after 10 steps continued in the other framework (docs/checkpoints.md), as
// OptimizerVsPyTorch's bound. Measured 2026-11-23: ddptrain -> Python 1.8e-7 (SGD nesterov), 3.0e-8 (AdamW);
// Python -> ddptrain 1.2e-7 / 3.0e-8, ddptrain resumed vs uninterrupted 1.2e-7 / 4.2e-7. Why 2e-6: the checkpoint
// carries the weights and optimizer state bit for bit, and each continued step is the same update composed
// differently, about an ulp of a weight (at most 1.2e-7 for |w| < 1) per step: 10 steps stay within 1.2e-6 even if
// every step rounded the same weight the same way by one ulp. A state entry lost or misread (momentum, Adam's moments,
// the step count) moves the weights by lr x |update|, 1e-4 and more.
constexpr double kInteropBound = 2e-6;
constexpr int kFirstSteps = 7, kMoreSteps = 10;  // 12 steps per epoch: the continuation crosses an epoch boundary

struct InteropCase {
  std::string name;
  std::string ours;    // ddptrain overrides
  std::string python;  // checkpoint_interop.py flags
};

// A tiny job (192 samples, batch 16, Net, init from init.pt, checkpoint every kFirstSteps) for ddptrain and the oracle.
class InteropJob {
 public:
  InteropJob() {
    write_tiny_mnist(dir / "data", 192, 16, 17);
    EXPECT_EQ(run_command(python() + " " + scripts() + "/make_net_init.py " + dir / "init.pt" + " 5").exit_code, 0);
    cfg_ = write_mnist_job(
        dir, dir / "data",
        {"job.seed=3", "data.batch_size=16", "model.dropout=0.0", "model.init_from=" + dir / "init.pt",
         "training.epochs=5", "checkpoint.every_steps=" + std::to_string(kFirstSteps), "metrics.log_every_steps=1"});
  }
  CommandResult ddptrain(const std::string& args) const {
    return run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg_ + " " + args);
  }
  CommandResult oracle(const std::string& args) const {
    return run_command(python() + " " + scripts() + "/checkpoint_interop.py " + args + " --data " + dir / "data" +
                       " --init " + dir / "init.pt" + " --seed 3 --batch 16");
  }
  static std::string steps(int n) { return " --training.max_steps=" + std::to_string(n); }
  TempDir dir;

 private:
  static std::string scripts() { return source_dir() + "/tests/python"; }
  std::string cfg_;
};

class CheckpointInterop : public ::testing::TestWithParam<InteropCase> {
 protected:
  void SetUp() override {
    if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
    job_ = std::make_unique<InteropJob>();
  }
  CommandResult ddptrain(const std::string& args) { return job_->ddptrain(GetParam().ours + " " + args); }
  CommandResult oracle(const std::string& args) { return job_->oracle(args + " " + GetParam().python); }
  static std::string steps(int n) { return InteropJob::steps(n); }
  std::unique_ptr<InteropJob> job_;
};

TEST_P(CheckpointInterop, DdptrainCheckpointContinuesInPythonLikeInDdptrain) {
  ASSERT_EQ(ddptrain("--job.out_dir=" + job_->dir / "run" + steps(kFirstSteps)).exit_code, 0);
  const std::string ckpt = job_->dir / "run/checkpoints/step-00000007.pt";
  auto py =
      oracle("continue --ckpt " + ckpt + " --steps " + std::to_string(kMoreSteps) + " --out " + job_->dir / "py.pt");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  // The checkpoint's optimizer entry has the layout (keys, types, dtypes, shapes) of torch's own state_dict() after
  // the same 7 steps, and the same values within the bound (each tensor scaled by max(1, its largest value)).
  EXPECT_NE(py.output.find("optimizer_layout_equal True"), std::string::npos) << py.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(py.output, m, std::regex("optimizer_state_max_diff ([0-9.e+-]+)"))) << py.output;
  EXPECT_LE(std::stod(m[1]), kInteropBound) << py.output;
  auto resumed = ddptrain("--job.out_dir=" + job_->dir / "run" + steps(kFirstSteps + kMoreSteps));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_NE(resumed.output.find("at step 7"), std::string::npos) << resumed.output;
  const double diff = max_state_diff(job_->dir / "run/model.pt", job_->dir / "py.pt");
  EXPECT_LE(diff, kInteropBound);
  EXPECT_GT(max_state_diff(job_->dir / "init.pt", job_->dir / "py.pt"), 1e-3);  // training moved the weights
  std::cout << GetParam().name << ": ddptrain -> Python max |diff| " << diff << std::endl;
}

TEST_P(CheckpointInterop, PythonCheckpointResumesInDdptrain) {
  auto py = oracle("write --steps " + std::to_string(kFirstSteps) + " --then " + std::to_string(kMoreSteps) +
                   " --ckpt " + job_->dir / "python_ckpt.pt" + " --out " + job_->dir / "py.pt");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  auto resumed = ddptrain("--job.out_dir=" + job_->dir / "resumed" + steps(kFirstSteps + kMoreSteps) +
                          " --checkpoint.resume=" + job_->dir / "python_ckpt.pt");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 7 (epoch 1, micro-batch 7)"), std::string::npos) << resumed.output;
  EXPECT_EQ(warnings_of_the_job(resumed.output), "") << resumed.output;
  ASSERT_EQ(ddptrain("--job.out_dir=" + job_->dir / "full" + steps(kFirstSteps + kMoreSteps)).exit_code, 0);
  const double vs_python = max_state_diff(job_->dir / "resumed/model.pt", job_->dir / "py.pt");
  const double vs_uninterrupted = max_state_diff(job_->dir / "resumed/model.pt", job_->dir / "full/model.pt");
  EXPECT_LE(vs_python, kInteropBound);
  EXPECT_LE(vs_uninterrupted, kInteropBound);
  std::cout << GetParam().name << ": Python -> ddptrain max |diff| " << vs_python << " (vs uninterrupted ddptrain "
            << vs_uninterrupted << ")" << std::endl;
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoint, CheckpointInterop,
    ::testing::Values(InteropCase{"sgd_nesterov",
                                  "--optimizer.lr=0.05 --optimizer.momentum=0.9 --optimizer.nesterov=true "
                                  "--optimizer.weight_decay=0.01",
                                  "--optimizer sgd --lr 0.05 --momentum 0.9 --nesterov 1 --weight-decay 0.01"},
                      InteropCase{"adamw_warmup",
                                  "--optimizer.name=adamw --optimizer.lr=0.003 --optimizer.weight_decay=0.05 "
                                  "--lr_scheduler.warmup_steps=10",
                                  "--optimizer adamw --lr 0.003 --weight-decay 0.05 --warmup 10"},
                      InteropCase{"adam_l2_amsgrad",
                                  "--optimizer.name=adam --optimizer.lr=0.002 --optimizer.weight_decay=0.01 "
                                  "--optimizer.amsgrad=true",
                                  "--optimizer adam --lr 0.002 --weight-decay 0.01 --amsgrad 1"},
                      // Param groups as torchvision's set_weight_decay makes them: Net's biases without weight
                      // decay (optimizer.bias_weight_decay), its weights with it; two param_groups entries. (Every
                      // optimizer's steps over groups: tests/optim/param_groups_test.cpp.)
                      InteropCase{"sgd_nesterov_groups",
                                  "--optimizer.lr=0.05 --optimizer.momentum=0.9 --optimizer.nesterov=true "
                                  "--optimizer.weight_decay=0.05 --optimizer.norm_weight_decay=0 "
                                  "--optimizer.bias_weight_decay=0",
                                  "--optimizer sgd --lr 0.05 --momentum 0.9 --nesterov 1 --weight-decay 0.05 "
                                  "--norm-weight-decay 0 --bias-weight-decay 0"},
                      // RMSprop's step g / (sqrt(v) + eps) is ~lr x sign(g) for any |g| >> eps: where a gradient
                      // entry is near zero, ddptrain's and PyTorch's rounding-level differences in it move the
                      // update by up to 8e-5 of lr x 3 with eps 1e-8 (measured); eps 1e-2 keeps the comparison to
                      // what the two optimizers do.
                      InteropCase{"rmsprop_centered_momentum",
                                  "--optimizer.name=rmsprop --optimizer.lr=0.002 --optimizer.momentum=0.9 "
                                  "--optimizer.centered=true --optimizer.eps=0.01 --optimizer.weight_decay=0.01",
                                  "--optimizer rmsprop --lr 0.002 --momentum 0.9 --centered 1 --eps 0.01 "
                                  "--weight-decay 0.01"}),
    [](const auto& info) { return info.param.name; });

// The number after `key` (e.g. "scaler_scale ") in `text`; NaN (and a test failure) when absent.
double number_after(const std::string& text, const std::string& key) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(key + "([0-9.eE+-]+)"))) return std::stod(m[1]);
  ADD_FAILURE() << "no " << key << " in " << text;
  return std::nan("");
}

// ddptrain's loss scale in the train record of optimizer step `step` (metrics.log_every_steps = 1).
double logged_loss_scale(const std::string& metrics_path, int step) {
  for (const std::string& line : read_lines(metrics_path))
    if (line.find("\"kind\":\"train\",\"step\":" + std::to_string(step) + ",") != std::string::npos)
      return number_after(line, "\"loss_scale\":");
  ADD_FAILURE() << "no train record for step " << step << " in " << metrics_path;
  return std::nan("");
}

// Format 1 checkpoints (the flat "<index>.<field>" optimizer layout every earlier ddptrain wrote) resume exactly:
// Python rewrites a format 2 checkpoint in that layout and both resumptions end with the same bytes.
TEST(CheckpointInterop, FormatOneCheckpointResumesLikeFormatTwo) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  InteropJob job;
  for (const std::string opt : {"--optimizer.momentum=0.9", "--optimizer.name=adamw --optimizer.lr=0.003"}) {
    ASSERT_EQ(job.ddptrain(opt + " --job.out_dir=" + job.dir / "run" + job.steps(kFirstSteps)).exit_code, 0);
    const std::string v2 = job.dir / "run/checkpoints/step-00000007.pt", v1 = job.dir / "v1.pt";
    auto edit = job.oracle("to-v1 --ckpt " + v2 + " --out " + v1);
    ASSERT_EQ(edit.exit_code, 0) << edit.output;
    for (const std::string& which : {v2, v1}) {
      const std::string out = job.dir / (which == v1 ? "from_v1" : "from_v2");
      auto r = job.ddptrain(opt + " --job.out_dir=" + out + job.steps(kFirstSteps + kMoreSteps) +
                            " --checkpoint.resume=" + which);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("at step 7"), std::string::npos) << r.output;
    }
    EXPECT_EQ(read_file(job.dir / "from_v1/model.pt"), read_file(job.dir / "from_v2/model.pt")) << opt;
    EXPECT_GT(max_state_diff(job.dir / "init.pt", job.dir / "from_v1/model.pt"), 1e-3);
    for (const char* sub : {"run", "from_v1", "from_v2"}) std::filesystem::remove_all(job.dir / sub);
  }
}

// ddptrain's scaler entry loads into torch.amp.GradScaler("cpu") with equal state_dict() and scale; a scaler state
// written by GradScaler in Python resumes in ddptrain: its next scale is the one torch's GradScaler reaches.
TEST(CheckpointInterop, ScalerStateLoadsIntoTorchGradScalerAndBack) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  InteropJob job;
  const std::string amp =
      "--optimizer.momentum=0.9 --amp.enabled=true --amp.loss_scaling=dynamic "
      "--amp.init_scale=1000 --amp.growth_factor=3 --amp.growth_interval=3 ";
  ASSERT_EQ(job.ddptrain(amp + "--job.out_dir=" + job.dir / "run" + job.steps(kFirstSteps)).exit_code, 0);
  auto loaded = job.oracle("scaler --ckpt " + job.dir / "run/checkpoints/step-00000007.pt");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_NE(loaded.output.find("scaler_state_equal True"), std::string::npos) << loaded.output;
  const double scale = number_after(loaded.output, "scaler_scale ");
  EXPECT_EQ(scale, logged_loss_scale(job.dir / "run/metrics.jsonl", kFirstSteps));
  EXPECT_NE(scale, 1000.0) << "the scale should have grown";
  // Reverse: GradScaler("cpu", init_scale=256, growth_factor=4, growth_interval=1) in a Python checkpoint.
  auto write = job.oracle("write --optimizer sgd --momentum 0.9 --steps 7 --then 0 --ckpt " + job.dir / "py.pt" +
                          " --out " + job.dir / "py_model.pt" +
                          " --scaler-init-scale 256 --scaler-growth-factor 4 --scaler-growth-interval 1");
  ASSERT_EQ(write.exit_code, 0) << write.output;
  auto torch_next = job.oracle("scaler --ckpt " + job.dir / "py.pt");
  ASSERT_EQ(torch_next.exit_code, 0) << torch_next.output;
  auto r = job.ddptrain(amp + "--job.out_dir=" + job.dir / "resumed" + job.steps(kFirstSteps + 1) +
                        " --checkpoint.resume=" + job.dir / "py.pt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(logged_loss_scale(job.dir / "resumed/metrics.jsonl", kFirstSteps + 1),
            number_after(torch_next.output, "scaler_scale_after_one_step "));
}

// A Python checkpoint without a required entry, or with one of the wrong type, is one error naming entry and file;
// param_groups disagreeing with the config in a hyperparameter other than lr is one warning line.
TEST(CheckpointInterop, MissingOrMistypedEntryIsAnErrorAndDifferingHyperparametersAWarning) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  InteropJob job;
  const std::string ckpt = job.dir / "py.pt";
  auto write = job.oracle("write --optimizer sgd --momentum 0.9 --steps 7 --then 0 --ckpt " + ckpt + " --out " +
                          job.dir / "py_model.pt");
  ASSERT_EQ(write.exit_code, 0) << write.output;
  // Each edit of a fresh load of the checkpoint saved to its file, all in one Python process.
  std::string edits = "import torch\n";
  auto edit = [&](const std::string& python_statement, const std::string& out) {
    edits += "d = torch.load('" + ckpt + "'); " + python_statement + "; torch.save(d, '" + out + "')\n";
  };
  edit("del d['global_step']", job.dir / "no_step.pt");
  edit("d['global_step'] = '7'", job.dir / "str_step.pt");
  edit("d['optimizer'] = d['optimizer']['state']", job.dir / "flat.pt");
  const CommandResult edited = run_command(python() + " -c " + shell_quote(edits));
  ASSERT_EQ(edited.exit_code, 0) << edited.output;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"no_step.pt", "checkpoint has no \"global_step\" entry (a checkpoint needs model, optimizer and global_step)"},
      {"str_step.pt", "checkpoint entry \"global_step\" is a str, expected an int"},
      // (the message goes on to name every optimizer's class)
      {"flat.pt", "checkpoint entry \"optimizer\" is not the state_dict() of torch.optim.SGD, torch.optim.AdamW, "}};
  for (const auto& [file, message] : cases) {
    auto r = job.ddptrain("--optimizer.momentum=0.9 --job.out_dir=" + job.dir / "o" + job.steps(9) +
                          " --checkpoint.resume=" + job.dir / file);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("error: resume from " + job.dir / file + ": " + message), std::string::npos) << r.output;
  }
  auto r = job.ddptrain("--optimizer.momentum=0.5 --optimizer.nesterov=true --job.out_dir=" + job.dir / "w" +
                        job.steps(9) + " --checkpoint.resume=" + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string warning =
      "warning: the checkpoint's optimizer param_groups differ from the config, whose values "
      "are used: momentum 0.9 (config 0.5), nesterov False (config True)\n";
  EXPECT_EQ(warnings_of_the_job(r.output), warning) << r.output;
}

// A checkpoint whose param groups another optimizer.norm_weight_decay / bias_weight_decay split made is refused, as
// torch.optim's load_state_dict refuses other groups, in one error naming both keys: ddptrain's without groups resumed
// with them, and Python's with set_weight_decay's groups resumed without. The same split with another group weight
// decay resumes with a warning.
TEST(CheckpointInterop, ResumingWithAnotherParamGroupSplitIsAnErrorNamingTheKeys) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  InteropJob job;
  ASSERT_EQ(
      job.ddptrain("--optimizer.momentum=0.9 --job.out_dir=" + job.dir / "run" + job.steps(kFirstSteps)).exit_code, 0);
  const std::string ours = job.dir / "run/checkpoints/step-00000007.pt", python_ckpt = job.dir / "py.pt";
  auto write = job.oracle("write --optimizer sgd --momentum 0.9 --bias-weight-decay 0 --steps 7 --then 0 --ckpt " +
                          python_ckpt + " --out " + job.dir / "py_model.pt");
  ASSERT_EQ(write.exit_code, 0) << write.output;
  const std::string keys =
      " group the parameters otherwise than the run that wrote the checkpoint (torchvision's "
      "set_weight_decay); resume with the values it was written with";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {ours, "--optimizer.bias_weight_decay=0",
       "optimizer.param_groups list 1 param group of 8 parameters, the optimizer has 2 param groups of 4 and 4 "
       "parameters: optimizer.norm_weight_decay = -1 (unset) and optimizer.bias_weight_decay = 0" +
           keys},
      {python_ckpt, "",
       "optimizer.param_groups list 2 param groups of 4 and 4 parameters, the optimizer has 1 param group of 8 "
       "parameters: optimizer.norm_weight_decay = -1 (unset) and optimizer.bias_weight_decay = -1 (unset)" +
           keys}};
  for (const auto& [ckpt, split, message] : cases) {
    auto r = job.ddptrain("--optimizer.momentum=0.9 " + split + " --job.out_dir=" + job.dir / "o" + job.steps(9) +
                          " --checkpoint.resume=" + ckpt);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("error: resume from " + ckpt + ": " + message + "\n"), std::string::npos) << r.output;
  }
  // The same split with another weight decay for a group: the config's, in one warning naming the group.
  auto r = job.ddptrain("--optimizer.momentum=0.9 --optimizer.bias_weight_decay=0.5 --job.out_dir=" + job.dir / "w" +
                        job.steps(9) + " --checkpoint.resume=" + python_ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(warnings_of_the_job(r.output),
            "warning: the checkpoint's optimizer param_groups differ from the config, whose values are used: "
            "param_groups[1] weight_decay 0 (config 0.5)\n")
      << r.output;
}

// An Adam checkpoint from a torch whose param_groups had no decoupled_weight_decay (Adam and AdamW then wrote the
// same groups) resumes under either name, exactly as the same file with the key does; another optimizer is refused
// naming both. With the key, Adam's file still refuses AdamW.
TEST(CheckpointInterop, AdamCheckpointWithoutDecoupledWeightDecayResumesAsAdamOrAdamW) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  InteropJob job;
  const std::string ckpt = job.dir / "adam.pt", old = job.dir / "adam_old_torch.pt";
  auto write = job.oracle("write --optimizer adam --lr 0.002 --weight-decay 0.01 --steps 7 --then 0 --ckpt " + ckpt +
                          " --out " + job.dir / "py_model.pt");
  ASSERT_EQ(write.exit_code, 0) << write.output;
  auto edit = run_command(
      python() + " -c \"import torch; d = torch.load('" + ckpt +
      "'); [g.pop('decoupled_weight_decay') for g in d['optimizer']['param_groups']]; torch.save(d, '" + old + "')\"");
  ASSERT_EQ(edit.exit_code, 0) << edit.output;
  auto resume = [&](const std::string& from, const std::string& optimizer, const std::string& out) {
    return job.ddptrain("--optimizer.name=" + optimizer +
                        " --optimizer.lr=0.002 --optimizer.weight_decay=0.01 --job.out_dir=" + job.dir / out +
                        job.steps(9) + " --checkpoint.resume=" + from);
  };
  for (const std::string optimizer : {"adam", "adamw"}) {
    auto r = resume(old, optimizer, optimizer + "_old");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(warnings_of_the_job(r.output), "") << r.output;
  }
  auto with_key = resume(ckpt, "adam", "adam_new");
  ASSERT_EQ(with_key.exit_code, 0) << with_key.output;
  EXPECT_EQ(read_file(job.dir / "adam_old/model.pt"), read_file(job.dir / "adam_new/model.pt"));
  EXPECT_GT(max_state_diff(job.dir / "adamw_old/model.pt", job.dir / "adam_new/model.pt"), 1e-6);  // AdamW's rule ran
  auto sgd = resume(old, "sgd", "sgd_old");
  EXPECT_EQ(sgd.exit_code, 1) << sgd.output;
  EXPECT_NE(sgd.output.find("error: resume from " + old +
                            ": checkpoint was written with optimizer adamw or adam, config asks for sgd"),
            std::string::npos)
      << sgd.output;
  auto adamw = resume(ckpt, "adamw", "adamw_new");
  EXPECT_EQ(adamw.exit_code, 1) << adamw.output;
  EXPECT_NE(adamw.output.find("checkpoint was written with optimizer adam, config asks for adamw"), std::string::npos)
      << adamw.output;
}

}  // namespace
}  // namespace ddp::test
