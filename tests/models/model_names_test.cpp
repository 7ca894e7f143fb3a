// Tests: our models' state_dict names/shapes/dtypes equal PyTorch's (tests/fixtures/model_state_names.txt), plus init.
#include "config/config.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "models/model_kind.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ddp {
namespace {

// Every model row built without a file of its own (models/registry.cpp): a row added there without a fixture fails
// here. (torchscript and plugin are the user's modules, their names their own: tests/models/torchscript_test.cpp,
// tests/models/plugin_test.cpp.) Read from the registry itself: the test's parameters are listed before the runner
// hands the rows down to config/.
const std::vector<std::string> kModels = [] {
  std::vector<std::string> names;
  for (const ModelKind* kind : model_kinds())
    if (!kind->row.reads_file()) names.emplace_back(kind->row.name);
  return names;
}();

std::string fixture_path() { return test::source_dir() + "/tests/fixtures/model_state_names.txt"; }

// Fixture lines grouped by model (first word), in file order.
const std::map<std::string, std::vector<std::string>>& fixture() {
  static const auto lines = [] {
    std::map<std::string, std::vector<std::string>> by_model;
    for (const std::string& line : test::read_lines(fixture_path()))
      if (!line.empty()) by_model[line.substr(0, line.find(' '))].push_back(line);
    return by_model;
  }();
  return lines;
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
      return "float32";
    case c10::kDouble:
      return "float64";
    case c10::kHalf:
      return "float16";
    case c10::kBFloat16:
      return "bfloat16";
    case c10::kLong:
      return "int64";
    case c10::kInt:
      return "int32";
    default:
      return c10::toString(t);
  }
}

// The side of the images a model is built for and fed here: 32 (ConvNeXt's smallest; two 16x16 patches a side for
// ViT), or 28 for a model whose row refuses 32x32 images (Net's one size).
int64_t image_side(const std::string& name) {
  Config cfg = parse_config("", "n.toml", {"model.name=resnet18", "data.dataset=synthetic", "data.image_size=32"});
  cfg.model.name = ModelChoice{name};
  const ModelRow& row = model_row(name);
  return row.check && row.check(cfg) ? 28 : 32;
}

std::shared_ptr<Classifier> build(const std::string& name) {
  ModelConfig cfg;
  cfg.name = ModelChoice{name};
  cfg.in_channels = 1;
  cfg.num_classes = 10;
  cfg.image_size = image_side(name);
  return make_model(cfg);
}

// `model name shape dtype` lines of our module_state, formatted like tests/fixtures/gen_model_names.py.
std::vector<std::string> our_lines(const std::string& model_name, const torch::nn::Module& model) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : module_state(model)) {
    std::ostringstream shape;
    for (int64_t d = 0; d < tensor.dim(); ++d) shape << (d ? "," : "") << tensor.size(d);
    const std::string s = tensor.dim() == 0 ? "scalar" : shape.str();
    out.push_back(model_name + " " + name + " " + s + " " + dtype_name(tensor.scalar_type()));
  }
  return out;
}

TEST(ModelNamesFixture, FileExistsAndCoversEveryModel) {
  ASSERT_GT(test::read_file(fixture_path()).size(), 1000u) << fixture_path();
  for (const std::string& m : kModels) EXPECT_FALSE(fixture().count(m) == 0 || fixture().at(m).empty()) << m;
}

class PerModel : public ::testing::TestWithParam<std::string> {};

TEST_P(PerModel, StateDictNamesShapesDtypesAndOrderMatchPyTorch) {
  const std::string name = GetParam();
  ASSERT_TRUE(fixture().count(name)) << name << " missing from " << fixture_path();
  const std::vector<std::string>& expected = fixture().at(name);
  torch::manual_seed(0);
  const std::vector<std::string> ours = our_lines(name, *build(name));
  for (size_t i = 0; i < std::min(ours.size(), expected.size()); ++i)
    ASSERT_EQ(ours[i], expected[i]) << "first difference at state_dict entry " << i;
  EXPECT_EQ(ours.size(), expected.size());
}

TEST_P(PerModel, ForwardMapsTwoImagesToTenScores) {
  torch::manual_seed(0);
  auto model = build(GetParam());
  const int64_t side = image_side(GetParam());
  torch::Tensor x = torch::randn({2, 1, side, side});
  for (bool training : {true, false}) {
    model->train(training);
    torch::NoGradGuard no_grad;
    torch::Tensor y = model->forward(x);
    EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 10})) << "training=" << training;
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(ModelNames, PerModel, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(ModelNamesFixture, GeneratorReproducesFixtureByteForByte) {
  const std::string py = test::python();
  if (!test::python_has_modules("torch, torchvision"))
    GTEST_SKIP() << py << " does not have torch and torchvision, so the fixture cannot be regenerated here";
  test::TempDir dir;
  const std::string out = dir / "model_state_names.txt";
  const auto r = test::run_command(test::shell_quote(py) + " " +
                                   test::shell_quote(test::source_dir() + "/tests/fixtures/gen_model_names.py") + " " +
                                   test::shell_quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::read_file(out) == test::read_file(fixture_path()))
      << "regenerated model-name fixture differs from the committed one (torch/torchvision version changed?)";
}

// torchvision's ResNet.__init__: kaiming_normal_(mode="fan_out", nonlinearity="relu") on every Conv2d (std
// sqrt(2 / (out_channels * kh * kw)), mean 0), BatchNorm weight 1 / bias 0, fc left at nn.Linear's default
// (uniform within +-1/sqrt(in_features)). Our stem gets the conv rule too (torchvision's, had it a 1-channel stem).
TEST(ModelNamesInit, ResNetInitFollowsTorchvisionRules) {
  for (const std::string name : {"resnet18", "resnet50"}) {
    torch::manual_seed(0);
    auto model = build(name);
    int convs = 0, bns = 0, linears = 0;
    for (const auto& item : model->named_modules()) {
      SCOPED_TRACE(name + " " + item.key());
      if (auto* conv = item.value()->as<torch::nn::Conv2d>()) {
        ++convs;
        const torch::Tensor w = conv->weight.detach();
        const double fan_out = static_cast<double>(w.size(0) * w.size(2) * w.size(3));
        // Sample statistics of N >= 3136 normal draws (the smallest conv): the std within about want / sqrt(2N)
        // (1.3%) and the mean within want / sqrt(N) (1.8%) of the rule's, so 10% is over 5 standard errors; a wrong
        // rule (fan_in, or nn.Conv2d's default uniform init) misses the std by 30% and more in some of the layers.
        const double want = std::sqrt(2.0 / fan_out), got = w.std().item<double>();
        EXPECT_NEAR(got, want, 0.1 * want);
        EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.1 * want);
        EXPECT_FALSE(conv->bias.defined());
      } else if (auto* bn = item.value()->as<torch::nn::BatchNorm2d>()) {
        ++bns;
        EXPECT_TRUE(bn->weight.detach().eq(1).all().item<bool>());
        EXPECT_TRUE(bn->bias.detach().eq(0).all().item<bool>());
        EXPECT_TRUE(bn->running_mean.eq(0).all().item<bool>());
        EXPECT_TRUE(bn->running_var.eq(1).all().item<bool>());
      } else if (auto* fc = item.value()->as<torch::nn::Linear>()) {
        ++linears;
        const double bound = 1.0 / std::sqrt(static_cast<double>(fc->weight.size(1)));
        EXPECT_LE(fc->weight.detach().abs().max().item<double>(), bound);
        EXPECT_LE(fc->bias.detach().abs().max().item<double>(), bound);
        // kaiming_uniform_(a=sqrt(5)) is uniform(-bound, bound): std bound / sqrt(3).
        EXPECT_NEAR(fc->weight.detach().std().item<double>(), bound / std::sqrt(3.0), 0.1 * bound / std::sqrt(3.0));
      }
    }
    // Every conv and BatchNorm was visited: PyTorch's state_dict has one 4-d weight per conv, one running_mean per BN.
    int fixture_convs = 0, fixture_bns = 0;
    for (const std::string& line : fixture().at(name)) {
      std::istringstream fields(line);
      std::string model_name, entry, shape;
      fields >> model_name >> entry >> shape;
      fixture_convs += std::count(shape.begin(), shape.end(), ',') == 3;
      fixture_bns += entry.size() > 13 && entry.compare(entry.size() - 13, 13, ".running_mean") == 0;
    }
    EXPECT_EQ(convs, fixture_convs);
    EXPECT_EQ(bns, fixture_bns);
    EXPECT_EQ(linears, 1);
  }
}

}  // namespace
}  // namespace ddp
