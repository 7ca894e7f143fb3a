// Tests of optimizer.norm_weight_decay and bias_weight_decay's param groups: the same groups, parameters in the same
// order, as torchvision's set_weight_decay makes in Python for torchvision's resnet18, the classic Net and a
// TorchScript module; each group's weight decay in every optimizer, whose steps over the groups equal torch.optim's
// in each implementation. Oracle: tests/python/param_groups_reference.py.
#include "checkpoint/state_dict.h"
#include "config/config.h"
#include "models/classifier.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <iostream>
#include <map>
#include <sstream>

namespace ddp::test {
namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// weight_decay_groups' groups as the Python lines: "group WEIGHT_DECAY NAME ...".
std::vector<std::string> our_lines(const std::vector<ParamGroup>& groups) {
  std::vector<std::string> lines;
  for (const ParamGroup& g : groups) {
    std::string line = "group " + number(g.weight_decay);
    for (const std::string& name : g.param_names) line += " " + name;
    lines.push_back(line);
  }
  return lines;
}

CommandResult oracle(const std::string& args) {
  return run_command(shell_quote(python()) + " " +
                     shell_quote(source_dir() + "/tests/python/param_groups_reference.py") + " " + args);
}

// The Python groups of every case, by "case MODEL NORM BIAS" line.
std::map<std::string, std::vector<std::string>> python_groups(const std::string& script_path, double wd,
                                                              const std::vector<std::pair<double, double>>& splits) {
  std::string args = "groups " + shell_quote(script_path) + " " + number(wd);
  for (const auto& [norm, bias] : splits) args += " " + number(norm) + " " + number(bias);
  const CommandResult r = oracle(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::vector<std::string>> out;
  std::string current;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("case ", 0) == 0) current = line;
    if (line.rfind("group ", 0) != 0) continue;
    // Python's repr of a whole float ("0.0") against C++'s shortest form ("0").
    std::istringstream words(line.substr(6));
    std::string decay, rest;
    words >> decay;
    std::getline(words, rest);
    out[current].push_back("group " + number(std::stod(decay)) + rest);
  }
  return out;
}

OptimizerConfig optimizer_config(double wd, double norm, double bias) {
  OptimizerConfig cfg;
  cfg.hyper.set("weight_decay", wd);
  cfg.hyper.set("norm_weight_decay", norm);
  cfg.hyper.set("bias_weight_decay", bias);
  return cfg;
}

std::shared_ptr<Classifier> build(const std::string& name, const std::string& path) {
  ModelConfig cfg;
  cfg.name = ModelChoice{name};
  cfg.path = path;
  return make_model(cfg);
}

TEST(WeightDecayGroups, MatchTorchvisionSetWeightDecayOnResnet18NetAndTorchScript) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << "no torch and torchvision in " << python();
  TempDir dir;
  const std::string script = dir / "scripted.pt";
  // (norm_weight_decay, bias_weight_decay): norm only, bias only, both, and a norm group with weight decay.
  const std::vector<std::pair<double, double>> splits = {{0, -1}, {-1, 0}, {0, 0}, {0.5, -1}};
  const auto expected = python_groups(script, 0.01, splits);
  size_t three_groups = 0;
  for (const std::string name : {"resnet18", "net", "torchscript"}) {
    const auto model = build(name, script);
    for (const auto& [norm, bias] : splits) {
      const std::string key = "case " + name + " " + number(norm) + " " + number(bias);
      SCOPED_TRACE(key);
      const std::vector<ParamGroup> groups =
          weight_decay_groups(*model, optimizer_config(0.01, norm, bias),
                              [&](const torch::nn::Module& m) { return model->is_norm_layer(m); });
      ASSERT_TRUE(expected.count(key));
      EXPECT_EQ(our_lines(groups), expected.at(key));
      three_groups += groups.size() == 3;
    }
  }
  EXPECT_EQ(three_groups, 2u);  // resnet18 and the TorchScript module with both keys set
}

// Both keys unset: one group of every parameter in parameters() order (a frozen one too), as before the keys.
TEST(WeightDecayGroups, UnsetIsOneGroupOfEveryParameter) {
  const auto model = build("resnet18", "");
  model->named_parameters()["fc.bias"].set_requires_grad(false);
  const auto groups = weight_decay_groups(*model, optimizer_config(0.01, -1, -1),
                                          [&](const torch::nn::Module& m) { return model->is_norm_layer(m); });
  ASSERT_EQ(groups.size(), 1u);
  const auto params = model->parameters();
  ASSERT_EQ(groups[0].params.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(groups[0].params[i].is_same(params[i])) << i;
  EXPECT_EQ(groups[0].weight_decay, 0.01);
}

// Every optimizer gets the groups in order, each with its weight decay; the schedule sets every group's lr.
TEST(WeightDecayGroups, EveryOptimizerHasTheGroupsWithTheirWeightDecay) {
  const auto model = build("resnet18", "");
  for (const std::string name : {"sgd", "adamw", "adam", "rmsprop"}) {
    SCOPED_TRACE(name);
    OptimizerConfig cfg = optimizer_config(0.05, 0.001, 0);
    cfg.name = OptimizerChoice{name};
    const auto groups =
        weight_decay_groups(*model, cfg, [&](const torch::nn::Module& m) { return model->is_norm_layer(m); });
    auto opt = make_optimizer(cfg, 0.1, groups);
    ASSERT_EQ(opt->param_groups().size(), 3u);
    const double expected[] = {0.05, 0.001, 0.0};
    for (size_t g = 0; g < 3; ++g) {
      const auto& options = opt->param_groups()[g].options();
      double wd = -1;
      if (name == "sgd") wd = static_cast<const torch::optim::SGDOptions&>(options).weight_decay();
      if (name == "adamw") wd = static_cast<const torch::optim::AdamWOptions&>(options).weight_decay();
      if (name == "adam") wd = static_cast<const torch::optim::AdamOptions&>(options).weight_decay();
      if (name == "rmsprop") wd = static_cast<const torch::optim::RMSpropOptions&>(options).weight_decay();
      EXPECT_EQ(wd, expected[g]) << g;
      ASSERT_EQ(opt->param_groups()[g].params().size(), groups[g].params.size());
    }
    set_lr(*opt, 0.25);
    for (const auto& g : opt->param_groups()) EXPECT_EQ(g.options().get_lr(), 0.25);
  }
}

// The optimizer case of param_groups_reference.py's CASES: optimizer.* keys and implementation.
struct StepCase {
  std::string name, optimizer;
  std::vector<std::pair<std::string, double>> numbers;
  std::vector<std::pair<std::string, bool>> flags;
  Foreach foreach = Foreach::Off;
  bool fused = false;
};

// Every optimizer's steps over the groups (other weight decay 0.1, norm 0.3, bias 0; a frozen parameter left out)
// equal torch.optim's over set_weight_decay's groups, in the loop, foreach and fused implementations, the learning
// rate set for every group each step, within OptimizerVsPyTorch's bound; weight decay 0.1 on every parameter
// (one group) ends elsewhere.
TEST(WeightDecayGroups, OptimizerStepsOverTheGroupsMatchTorchOptim) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const int steps = 12;
  const std::string script = dir / "small.pt";
  const CommandResult r = oracle("steps " + shell_quote(script) + " " + shell_quote(dir / "py_") + " " +
                                 std::to_string(steps) + " 0.1 0.3 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<StepCase> cases = {{"sgd", "sgd", {{"momentum", 0.9}}, {}},
                                       {"sgd_foreach", "sgd", {{"momentum", 0.9}}, {{"nesterov", true}}, Foreach::On},
                                       {"sgd_fused", "sgd", {{"momentum", 0.9}}, {}, Foreach::Off, true},
                                       {"adamw", "adamw", {}, {}},
                                       {"adamw_foreach", "adamw", {}, {{"amsgrad", true}}, Foreach::On},
                                       {"adamw_fused", "adamw", {}, {}, Foreach::Off, true},
                                       {"adam_foreach", "adam", {}, {}, Foreach::On},
                                       {"rmsprop_foreach", "rmsprop", {{"momentum", 0.5}}, {}, Foreach::On}};
  const auto train = [&](const StepCase& c, double norm, double bias) {
    auto model = build("torchscript", script);
    OptimizerConfig cfg = optimizer_config(0.1, norm, bias);
    cfg.name = OptimizerChoice{c.optimizer};
    for (const auto& [key, value] : c.numbers) cfg.hyper.set(key, value);
    for (const auto& [key, value] : c.flags) cfg.hyper.set(key, value);
    cfg.foreach = c.foreach;
    cfg.fused = c.fused;
    auto opt = make_optimizer(cfg, 0.1, weight_decay_groups(*model, cfg, [&](const torch::nn::Module& m) {
                                return model->is_norm_layer(m);
                              }));
    std::vector<torch::Tensor> trained;
    for (const auto& p : model->parameters())
      if (p.requires_grad()) trained.push_back(p);
    for (int t = 0; t < steps; ++t) {
      for (size_t i = 0; i < trained.size(); ++i) {
        torch::manual_seed(1000 * t + i);
        trained[i].mutable_grad() = torch::randn(trained[i].sizes());
      }
      set_lr(*opt, 0.1 * (t + 1) / steps);
      opt->step();
    }
    const std::string out = dir / ("ours_" + c.name + ".pt");
    save_state_dict(out, module_state(*model));
    return out;
  };
  const std::string init = dir / "init.pt";
  save_state_dict(init, module_state(*build("torchscript", script)));
  for (const StepCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string python_out = dir / ("py_" + c.name + ".pt");
    const double diff = max_state_diff(train(c, 0.3, 0), python_out);
    EXPECT_LE(diff, 2e-6);
    std::cout << c.name << ": max |diff| vs torch.optim over the groups " << diff << std::endl;
    EXPECT_GT(max_state_diff(init, python_out), 1e-2);  // the steps moved the weights
  }
  EXPECT_GT(max_state_diff(train(cases[0], -1, -1), dir / "py_sgd.pt"), 1e-3);
}

}  // namespace
}  // namespace ddp::test
