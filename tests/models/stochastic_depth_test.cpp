// stochastic_depth (models/stochastic_depth.h) draws the same masks as torchvision.ops.stochastic_depth from the same
// generator state, and is the identity outside training or at p = 0.
#include "models/stochastic_depth.h"
#include "tests/support/test_support.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>

namespace ddp::test {
namespace {

struct DepthCase {
  StochasticDepthMode mode;
  const char* name;
  double p;
  int seed;
};

// torchvision's output for each case on arange(48) shaped [4, 3, 2, 2] after torch.manual_seed(seed), one line each.
std::vector<std::vector<double>> torchvision_outputs(const std::vector<DepthCase>& cases) {
  std::string args;
  for (const DepthCase& c : cases)
    args += " " + std::string(c.name) + ":" + std::to_string(c.p) + ":" + std::to_string(c.seed);
  const std::string code =
      "import sys, torch, torchvision\n"
      "for case in sys.argv[1:]:\n"
      "    mode, p, seed = case.split(':'); torch.manual_seed(int(seed))\n"
      "    x = torch.arange(48, dtype=torch.float32).reshape(4, 3, 2, 2)\n"
      "    y = torchvision.ops.stochastic_depth(x, float(p), mode, True)\n"
      "    print(' '.join(repr(v) for v in y.flatten().tolist()))";
  const CommandResult r = run_command(python() + " -c " + shell_quote(code) + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::vector<double>> out;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    out.emplace_back();
    for (double v; in >> v;) out.back().push_back(v);
  }
  return out;
}

TEST(StochasticDepth, SameMasksAsTorchvisionFromTheSameSeed) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  std::vector<DepthCase> cases;
  for (const auto& [mode, name] : {std::pair{StochasticDepthMode::Row, "row"}, {StochasticDepthMode::Batch, "batch"}})
    for (const double p : {0.2, 0.5, 1.0})
      for (const int seed : {0, 7}) cases.push_back({mode, name, p, seed});
  const std::vector<std::vector<double>> expected = torchvision_outputs(cases);
  ASSERT_EQ(expected.size(), cases.size());
  int dropped = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    at::manual_seed(cases[c].seed);
    const at::Tensor x = at::arange(48, at::kFloat).reshape({4, 3, 2, 2});
    const at::Tensor y = stochastic_depth(x, cases[c].p, cases[c].mode, /*training=*/true).flatten();
    ASSERT_EQ(expected[c].size(), 48u) << cases[c].name;
    for (int64_t i = 0; i < 48; ++i) {
      EXPECT_EQ(y[i].item<float>(), static_cast<float>(expected[c][i]))
          << cases[c].name << " p " << cases[c].p << " seed " << cases[c].seed << " at " << i;
      dropped += y[i].item<float>() == 0 && i != 0;
    }
  }
  EXPECT_GT(dropped, 0);  // some samples were dropped: the masks were drawn, not skipped
}

TEST(StochasticDepth, IdentityOutsideTrainingOrAtZero) {
  const at::Tensor x = at::randn({2, 3});
  EXPECT_TRUE(stochastic_depth(x, 0.5, StochasticDepthMode::Row, false).is_same(x));
  EXPECT_TRUE(stochastic_depth(x, 0.0, StochasticDepthMode::Row, true).is_same(x));
  EXPECT_THROW(stochastic_depth(x, 1.5, StochasticDepthMode::Row, true), std::invalid_argument);
}

}  // namespace
}  // namespace ddp::test
