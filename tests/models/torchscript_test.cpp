// model.name = "torchscript": a module scripted in Python trains on two ranks as Python DDP trains its eager twin,
// writes model.pt under the module's own names and model_scripted.pt that torch.jit.load runs; a traced torchvision
// ResNet trains; files that are no TorchScript, or whose forward gives no logits, are one clear error.
#include "tests/checkpoint/resume_job.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace ddp::test {
namespace {

std::string torchscript_script() { return source_dir() + "/tests/python/torchscript_reference.py"; }

void torchscript_python(const std::string& args) {
  const CommandResult r = run_command(python() + " " + torchscript_script() + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// 20 steps of the scripted module on 2 ranks against Python DDP on its eager twin, in float32, under bfloat16
// autocast ("bf16": torch.autocast("cpu", torch.bfloat16) in Python, amp.dtype = "bfloat16" here) or under float16
// autocast with dynamic loss scaling ("fp16": torch.amp.GradScaler("cpu") there); returns the largest difference of
// the trained weights. With `unused` ("find_unused" or "static_graph"), the module has a head its forward never uses,
// and both sides search for unused parameters every step (DDP's find_unused_parameters=True,
// dist.find_unused_parameters = true) or take the graph as static (static_graph=True, dist.static_graph = true).
double torchscript_vs_python_ddp(const TempDir& dir, const std::string& amp, const std::string& unused = "") {
  write_tiny_mnist(dir / "data", 400, 32, 5);
  const bool spare_head = !unused.empty();
  const std::string kind = spare_head ? " --kind spare" : "";
  const std::string python_unused = unused == "find_unused" ? " --find-unused 1" : " --static-graph 1";
  torchscript_python("make " + dir / "net.pt" + " --seed 11" + kind);
  const CommandResult ref = run_python_ranks(
      2, torchscript_script() + " train --data " + dir / "data" + " --init " + dir / "net.pt" + " --out " +
             dir / "python.pt" + " --batch 16 --steps 20 --lr 0.05 --momentum 0.9 --seed 3" +
             (amp.empty() ? "" : " --amp " + amp) + (spare_head ? kind + python_unused : ""));
  EXPECT_TRUE(std::filesystem::exists(dir / "python.pt")) << ref.output;
  std::vector<std::string> keys = {"model.name=torchscript",
                                   "model.path=" + dir / "net.pt",
                                   "data.batch_size=16",
                                   "data.workers=0",
                                   "optimizer.lr=0.05",
                                   "optimizer.momentum=0.9",
                                   "job.seed=3",
                                   "job.out_dir=" + dir / "out",
                                   "training.max_steps=20",
                                   "training.epochs=5",
                                   "metrics.progress=off"};
  if (amp == "bf16") keys.insert(keys.end(), {"amp.enabled=true", "amp.dtype=bfloat16"});
  if (amp == "fp16") keys.insert(keys.end(), {"amp.enabled=true", "amp.dtype=float16"});  // loss scaling: auto
  if (spare_head)
    keys.push_back(unused == "find_unused" ? "dist.find_unused_parameters=true" : "dist.static_graph=true");
  for (const auto& r : run_ranks(2, write_mnist_job(dir, dir / "data", keys))) EXPECT_EQ(r.exit_code, 0) << r.output;
  const double diff = max_state_diff(dir / "out/model.pt", dir / "python.pt");
  std::cout << "[ measured ] max |ddptrain - Python DDP| after 20 steps" << (amp.empty() ? "" : " (" + amp + ")")
            << ": " << diff << "\n";
  return diff;
}

TEST(TorchScript, TwoRanksMatchPythonDdpOnTheEagerModule) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  EXPECT_LE(torchscript_vs_python_ddp(dir, ""), 1e-5);  // measured: 0 (the module runs op by op, as eager PyTorch)
  // One Python process: the initial module's state dict saved for the comparison below, then model_scripted.pt
  // checked to be the trained module: its state_dict is model.pt, and it runs.
  const CommandResult check = run_command(
      python() +
      " -c \"import sys, torch; torch.save(dict(torch.jit.load(sys.argv[1]).state_dict()), sys.argv[2]); "
      "m = torch.jit.load(sys.argv[3]); sd = torch.load(sys.argv[4]); "
      "assert not m.training; "
      "assert all(torch.equal(v, sd[k]) for k, v in m.state_dict().items()) and len(sd) == len(m.state_dict()); "
      "print(tuple(m(torch.zeros(3, 1, 28, 28)).shape))\" " +
      dir / "net.pt " + dir / "net.pt.state " + dir / "out/model_scripted.pt " + dir / "out/model.pt");
  ASSERT_TRUE(std::filesystem::exists(dir / "net.pt.state")) << check.output;
  EXPECT_GT(max_state_diff(dir / "net.pt.state", dir / "python.pt"), 1e-3);  // the steps moved the weights
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("(3, 10)"), std::string::npos) << check.output;
}

// The head the forward never uses gets no gradient, so neither side moves it, and the Reducer marks it ready itself.
// Each synchronising step's wait for the all-reduce still starts where every gradient there will be is computed:
// the spare head's never come, so that moment is taken at the end of backward's graph, and time_comm_s stays above 0.
TEST(TorchScript, UnusedHeadTrainsAsPythonDdpWithFindUnusedParameters) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  EXPECT_LE(torchscript_vs_python_ddp(dir, "", "find_unused"), 1e-5);  // measured: 0
  const CommandResult spare =
      run_command(python() +
                  " -c \"import sys, torch; a = torch.jit.load(sys.argv[1]).state_dict(); b = torch.load(sys.argv[2]); "
                  "assert set(a) == set(b), (set(a) ^ set(b)); "
                  "assert all(torch.equal(a[k], b[k]) == k.startswith('spare.') for k in a if k.endswith('weight')); "
                  "print('spare head untouched')\" " +
                  dir / "net.pt " + dir / "out/model.pt");
  EXPECT_EQ(spare.exit_code, 0) << spare.output;
  EXPECT_NE(spare.output.find("spare head untouched"), std::string::npos) << spare.output;
  int records = 0;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("kind") != "train") continue;
    ++records;
    EXPECT_GT(j.at("time_comm_s").get<double>(), 0) << line;
  }
  EXPECT_GT(records, 0);
}

// dist.static_graph = true trains the module with the spare head as DDP(static_graph=True) does: the unused parameters
// found in the first step, none searched for after it.
TEST(TorchScript, StaticGraphTrainsAsPythonDdp) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  EXPECT_LE(torchscript_vs_python_ddp(dir, "", "static_graph"), 1e-5);  // measured: 0
}

// Without dist.find_unused_parameters the Reducer refuses the next forward (the spare head's bucket never filled);
// every rank stops with one line naming the parameters and the key, where PyTorch names indices and its own keyword.
TEST(TorchScript, UnusedHeadWithoutFindUnusedParametersIsOneErrorNamingThemAndTheKey) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 1);
  torchscript_python("make " + dir / "net.pt" + " --kind spare");
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.batch_size=8",
                       "training.max_steps=3", "job.out_dir=" + dir / "out", "metrics.progress=off"});
  const std::string line =
      "error: DDP: the last synchronised backward computed no gradient for spare.weight, spare.bias (the forward did "
      "not use them), so their buckets were never all-reduced; set dist.find_unused_parameters = true (PyTorch DDP's "
      "find_unused_parameters=True)\n";
  for (const auto& r : run_ranks(2, cfg)) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("error:"), r.output.rfind("error:")) << r.output;
  }
}

// Under bf16 and fp16 autocast as in fp32: the scripted module runs op by op, as eager PyTorch does, autocast casts
// the same operations' inputs on both sides, and the scaler and optimizer run torch.amp's and torch.optim's kernels,
// so both sides compute the same float arithmetic in the same order: 0 measured after 20 steps on AVX2 and on the
// plain path. 1e-5 leaves room only for a reassociation (a few float32 units, u = 2^-24, of weights below 1 per
// step); a cast missed or made in the other precision moves bf16 results by 2^-8 of a value, and a step the scaler
// should have skipped moves the weights by lr x |g|.
TEST(TorchScript, TwoRanksMatchPythonDdpUnderBf16Autocast) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  EXPECT_LE(torchscript_vs_python_ddp(dir, "bf16"), 1e-5);
}

TEST(TorchScript, TwoRanksMatchPythonDdpUnderFp16AutocastWithLossScaling) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  EXPECT_LE(torchscript_vs_python_ddp(dir, "fp16"), 1e-5);
}

// fp16 autocast with dynamic loss scaling and an EMA of the weights on the scripted module, stopped at a checkpoint
// and resumed: the same weights and average to the bit as the run that went straight through. Ten steps an epoch, so
// the resumed run starts at an epoch's end; small batches, as float16 convolutions on a CPU take LibTorch's slow path.
TEST(TorchScript, Fp16RunResumedFromACheckpointIsBitIdentical) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  torchscript_python("make " + dir / "net.pt" + " --seed 2");
  auto run = [&](const std::string& out, int steps) {
    const std::string cfg =
        write_mnist_job(dir, "",
                        {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.synthetic_train_size=160",
                         "data.batch_size=16", "data.synthetic_test_size=64", "amp.enabled=true", "amp.dtype=float16",
                         "training.ema_decay=0.9", "checkpoint.every_steps=10", "job.out_dir=" + dir / out,
                         "training.max_steps=" + std::to_string(steps), "metrics.progress=plain", "job.threads=1"});
    const CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + cfg + " --data.dataset=synthetic");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r;
  };
  run("straight", 20);
  run("resumed", 10);
  EXPECT_NE(run("resumed", 20).output.find("resumed from"), std::string::npos);
  EXPECT_EQ(max_state_diff(dir / "straight/model.pt", dir / "resumed/model.pt"), 0.0);
  EXPECT_EQ(max_state_diff(dir / "straight/model_ema.pt", dir / "resumed/model_ema.pt"), 0.0);
}

// Under ddprun --max-restarts, a worker of a TorchScript run killed with SIGKILL after step 13 restarts, resumes from
// the step-10 checkpoint and ends with the model.pt of an uninterrupted run, byte for byte.
TEST(TorchScript, KilledWorkerResumesUnderDdprunBitIdentical) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  torchscript_python("make " + dir / "net.pt" + " --seed 5");
  write_tiny_job(dir, 640, 32, 21,
                 {"model.name=torchscript", "model.path=" + dir / "net.pt", "data.batch_size=16", "optimizer.lr=0.05",
                  "optimizer.momentum=0.9", "training.max_steps=30", "checkpoint.every_steps=10",
                  "metrics.log_every_steps=1", "dist.timeout_s=30.0"});
  expect_killed_worker_resumes_bit_identical(
      dir, " --standalone --nproc-per-node=2 --grace-period=2 " + ddptrain_path() + " " + dir / "cfg.toml", 13);
}

TEST(TorchScript, ATracedTorchvisionResnetTrains) {
  if (!python_has_modules("torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  write_tiny_cifar10(dir / "c", 8, 8, 2);
  const CommandResult traced = run_command(python() +
                                           " -c \"import sys, torch, torchvision; torch.manual_seed(0); "
                                           "m = torchvision.models.resnet18(num_classes=10); "
                                           "torch.save(dict(m.state_dict()), sys.argv[2]); "
                                           "torch.jit.trace(m, torch.randn(2, 3, 32, 32)).save(sys.argv[1])\" " +
                                           dir / "resnet18.pt " + dir / "init.pt");
  ASSERT_EQ(traced.exit_code, 0) << traced.output;
  const std::string cfg =
      write_mnist_job(dir, dir / "c",
                      {"model.name=torchscript", "model.path=" + dir / "resnet18.pt", "data.batch_size=8",
                       "training.max_steps=2", "job.out_dir=" + dir / "out", "metrics.progress=off"});
  const CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + cfg + " --data.dataset=cifar10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // torchvision's names and shapes (max_state_diff throws otherwise), moved by the two steps.
  EXPECT_GT(max_state_diff(dir / "out/model.pt", dir / "init.pt"), 0.0);
  EXPECT_TRUE(std::filesystem::exists(dir / "out/model_scripted.pt"));
}

TEST(TorchScript, FilesThatAreNoModelOfLogitsAreOneClearError) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 1);
  torchscript_python("make " + dir / "pair.pt" + " --kind pair");
  write_file(dir / "text.pt", "not a module");
  auto run = [&](const std::string& path) {
    const std::string cfg =
        write_mnist_job(dir, dir / "data",
                        {"model.name=torchscript", "model.path=" + path, "job.out_dir=" + dir / "out",
                         "training.max_steps=1", "metrics.progress=off"});
    return run_command(shell_quote(ddptrain_path()) + " " + cfg);
  };
  const CommandResult text = run(dir / "text.pt");
  EXPECT_EQ(text.exit_code, 1) << text.output;
  EXPECT_NE(text.output.find("error: " + dir / "text.pt: not a TorchScript module"), std::string::npos) << text.output;
  const CommandResult pair = run(dir / "pair.pt");
  EXPECT_EQ(pair.exit_code, 1) << pair.output;
  EXPECT_NE(pair.output.find("its forward returned Tuple, not a tensor of logits"), std::string::npos) << pair.output;
  // A forward that fails inside the interpreter (three input channels for MNIST's one): the file and the cause.
  const CommandResult made = run_command(
      python() + " -c " +
      shell_quote("import sys, torch\n"
                  "nn = torch.nn\n"
                  "m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))\n"
                  "torch.jit.script(m).save(sys.argv[1])\n") +
      " " + dir / "rgb.pt");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const CommandResult rgb = run(dir / "rgb.pt");
  EXPECT_EQ(rgb.exit_code, 1) << rgb.output;
  const size_t at = rgb.output.find("error: " + dir / "rgb.pt: its forward failed on a batch of shape ");
  ASSERT_NE(at, std::string::npos) << rgb.output;
  const std::string line = rgb.output.substr(at, rgb.output.find('\n', at) - at);
  EXPECT_NE(line.find("to have 3 channels, but got 1 channels instead"), std::string::npos) << line;
  // Tied weights (one tensor under two names, which torch.jit.save keeps as one): refused, naming both.
  write_file(dir / "tied.py",
             "import sys, torch\n"
             "nn = torch.nn\n"
             "class Tied(nn.Module):\n"
             "    def __init__(self):\n"
             "        super().__init__()\n"
             "        self.a = nn.Linear(784, 784)\n"
             "        self.b = nn.Linear(784, 10)\n"
             "        self.c = nn.Linear(784, 784)\n"
             "        self.c.weight = self.a.weight\n"
             "    def forward(self, x):\n"
             "        return self.b(self.c(self.a(x.flatten(1))))\n"
             "torch.jit.script(Tied()).save(sys.argv[1])\n");
  const CommandResult tied_made = run_command(python() + " " + dir / "tied.py" + " " + dir / "tied.pt");
  ASSERT_EQ(tied_made.exit_code, 0) << tied_made.output;
  const CommandResult tied = run(dir / "tied.pt");
  EXPECT_EQ(tied.exit_code, 1) << tied.output;
  EXPECT_NE(tied.output.find("error: " + dir / "tied.pt: parameters \"a.weight\" and \"c.weight\" are one tensor "
                                               "(tied weights)"),
            std::string::npos)
      << tied.output;
  // model.sync_batchnorm cannot reach into the compiled forward: the BatchNorm layers are named.
  torchscript_python("make " + dir / "net.pt" + " --seed 3");
  const CommandResult sync = run_command(shell_quote(ddptrain_path()) + " " +
                                         write_mnist_job(dir, dir / "data",
                                                         {"model.name=torchscript", "model.path=" + dir / "net.pt",
                                                          "model.sync_batchnorm=true", "job.out_dir=" + dir / "out"}));
  EXPECT_EQ(sync.exit_code, 2) << sync.output;
  EXPECT_NE(sync.output.find("model.sync_batchnorm = true cannot convert the BatchNorm layers of the TorchScript "
                             "module " +
                             dir / "net.pt" + " (bn, block.1, block.4)"),
            std::string::npos)
      << sync.output;
  const CommandResult none =
      run_command(shell_quote(ddptrain_path()) + " " + write_mnist_job(dir, dir / "data", {"model.name=torchscript"}));
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("needs model.path"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace ddp::test
