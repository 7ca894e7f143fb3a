// FLOPs per training sample (report/flop_counter.h) equal torch.utils.flop_counter.FlopCounterMode's count of the
// same model's forward and backward in Python; train records carry the achieved TFLOP/s.
#include "report/flop_counter.h"
#include "tests/models/torchvision_cnn_names.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <regex>
#include <sstream>

namespace ddp::test {
namespace {

// FlopCounterMode over one training forward and backward of reference/'s models on 16 1x28x28 images, per sample,
// each model in turn in one Python process.
std::vector<double> python_flops_per_sample(const std::vector<std::string>& models) {
  const std::string code =
      "import sys, torch, torch.nn.functional as F; sys.path.insert(0, sys.argv[1]); "
      "from torch_reference import build_model; from torch.utils.flop_counter import FlopCounterMode\n"
      "for name in sys.argv[2:]:\n"
      "    m = build_model(name, dropout=0.0); m.train(); x = torch.randn(16, 1, 28, 28); "
      "y = torch.randint(0, 10, (16,))\n"
      "    with FlopCounterMode(display=False) as fc:\n"
      "        out = m(x); (F.nll_loss(out, y) if name == 'net' else F.cross_entropy(out, y)).backward()\n"
      "    print(fc.get_total_flops() / 16)";
  std::string args;
  for (const auto& model : models) args += " " + shell_quote(model);
  const CommandResult r =
      run_command(python() + " -c " + shell_quote(code) + " " + shell_quote(source_dir() + "/reference") + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> flops;
  std::istringstream said(r.output);
  for (double f = 0; flops.size() < models.size() && said >> f;) flops.push_back(f);
  EXPECT_EQ(flops.size(), models.size()) << r.output;
  flops.resize(models.size(), -1);
  return flops;
}

// What ddptrain says after its first micro-batch, in FLOPs. The counts are integers that no kernel's rounding
// touches; ddptrain prints GFLOP with 6 significant digits (%.6g), at most 5e-6 off the count, so the checks allow
// 1e-5 of it: a count that differs at all (a missed or extra operator) differs by far more.
double ddptrain_flops_per_sample(const TempDir& dir, const std::string& model, const std::string& extra) {
  const std::string cfg = write_mnist_job(dir, dir / "data",
                                          {"job.out_dir=" + dir / "out", "model.name=" + model, "data.batch_size=16",
                                           "training.max_steps=2", "metrics.log_every_steps=1", "job.threads=1"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex said("FLOPs: ([0-9.e+]+) GFLOP per training sample");
  EXPECT_TRUE(std::regex_search(r.output, m, said)) << r.output;
  return m.empty() ? -1 : std::stod(m[1]) * 1e9;
}

TEST(Flops, PerSampleEqualPythonsFlopCounterModeAndTrainRecordsCarryTflops) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 2);
  const std::vector<double> python = python_flops_per_sample({"net", "resnet18"});
  const double net = ddptrain_flops_per_sample(dir, "net", "");
  EXPECT_NEAR(net / python[0], 1.0, 1e-5) << net;
  // Achieved TFLOP/s in each train record: FLOPs per sample x samples/s.
  const std::regex record("\"samples_per_s\":([0-9.e+-]+).*\"tflops\":([0-9.e+-]+)");
  int records = 0;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    std::smatch m;
    if (!std::regex_search(line, m, record)) continue;
    ++records;
    EXPECT_NEAR(std::stod(m[2]), net * std::stod(m[1]) / 1e12, 1e-9 + 1e-4 * std::stod(m[2])) << line;
  }
  EXPECT_EQ(records, 2);
  // ResNet-18 with every kernel tap computed is PyTorch's count; skipping the taps that only read padding (the
  // default) computes less. The count comes after the first micro-batch: one step is enough.
  const double resnet =
      ddptrain_flops_per_sample(dir, "resnet18", " --model.skip_padding_taps=false --training.max_steps=1");
  EXPECT_NEAR(resnet / python[1], 1.0, 1e-5) << resnet;
  EXPECT_LT(ddptrain_flops_per_sample(dir, "resnet18", " --training.max_steps=1"), resnet * 0.99);
}

// Each torchvision CNN built here, every kernel tap computed, counts what FlopCounterMode counts of torchvision's.
class TorchvisionCnnFlops : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchvisionCnnFlops, PerSampleEqualPythonsFlopCounterMode) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torch, torchvision";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 2);
  const double ours = ddptrain_flops_per_sample(dir, GetParam(), " --model.skip_padding_taps=false");
  EXPECT_NEAR(ours / python_flops_per_sample({GetParam()})[0], 1.0, 1e-5) << ours;
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionCnnFlops, ::testing::ValuesIn(kTorchvisionCnns),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The fused attention kernels FlopCounterMode registers count with its sdpa_flop_count and sdpa_backward_flop_count
// (query, key, value of different lengths and head sizes), the CPU's flash kernel as 0, as FlopCounterMode counts it.
TEST(Flops, FusedAttentionKernelsCountAsFlopCounterModesFormulas) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  const std::vector<int64_t> q{2, 3, 5, 8}, k{2, 3, 7, 8}, v{2, 3, 7, 4}, grad_out{2, 3, 5, 4};
  const std::string code =
      "from torch.utils.flop_counter import sdpa_flop_count as f, sdpa_backward_flop_count as b; "
      "q, k, v, g = (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), (2, 3, 5, 4); print(f(q, k, v), b(g, q, k, v))";
  const CommandResult r = run_command(python() + " -c " + shell_quote(code));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream said(r.output);
  int64_t forward = 0, backward = 0;
  said >> forward >> backward;
  ASSERT_GT(forward, 0) << r.output;
  const std::vector<c10::IValue> fwd_inputs{torch::empty(q), torch::empty(k), torch::empty(v)};
  const std::vector<c10::IValue> bwd_inputs{torch::empty(grad_out), torch::empty(q), torch::empty(k), torch::empty(v)};
  const c10::ArrayRef<const c10::IValue> fwd(fwd_inputs.data(), fwd_inputs.size());
  const c10::ArrayRef<const c10::IValue> bwd(bwd_inputs.data(), bwd_inputs.size());
  for (const char* op : {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                         "aten::_scaled_dot_product_cudnn_attention"})
    EXPECT_EQ(operator_flops(op, fwd), forward) << op;
  for (const char* op :
       {"aten::_scaled_dot_product_flash_attention_backward", "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention_backward"})
    EXPECT_EQ(operator_flops(op, bwd), backward) << op;
  EXPECT_EQ(operator_flops("aten::_scaled_dot_product_flash_attention_for_cpu", fwd), 0);
}

}  // namespace
}  // namespace ddp::test
