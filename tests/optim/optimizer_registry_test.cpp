// The optimizer rows: each optimizer.name has exactly one row; each row's state round-trips through the torch.optim
// class it names and is recognised as its own by its row alone; the config reads the rows' keys and rules.
#include "base/capturable_step.h"
#include "checkpoint/state_dict.h"
#include "config/config.h"
#include "optim/optimizer.h"
#include "optim/optimizer_kind.h"
#include "optim/optimizer_state.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

namespace ddp::test {
namespace {

TEST(OptimizerRows, EveryNameHasExactlyOneRowAndTheConfigReadsThem) {
  std::set<std::string> names;
  for (const OptimizerKind* kind : optimizer_kinds()) {
    EXPECT_TRUE(names.insert(std::string(kind->keys.name)).second) << kind->keys.name << " has two rows";
    EXPECT_EQ(&optimizer_kind(kind->keys.name), kind);
    EXPECT_TRUE(kind->make && kind->wrote) << kind->keys.name;
    // Every key the row declares is an [optimizer] key of the config, with the row's default.
    const Config cfg = parse_config("[optimizer]\nname = \"" + std::string(kind->keys.name) + "\"\n", "f.toml");
    for (const HyperparameterKey& h : kind->keys.keys) {
      if (h.flag)
        EXPECT_EQ(cfg.optimizer.hyper.flag(h.key.name), h.default_value != 0) << h.key.name;
      else
        EXPECT_EQ(cfg.optimizer.hyper.number(h.key.name), h.default_value) << h.key.name;
    }
  }
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.end()).size(), optimizer_names().size());
  EXPECT_EQ(optimizer_rows().size(), optimizer_kinds().size());
  EXPECT_TRUE(names.count("rmsprop"));
  // Shared keys' docs name every optimizer that takes them.
  for (const HyperparameterKey& h : hyperparameter_keys()) {
    if (std::string(h.key.name) == "momentum") {
      EXPECT_EQ(std::string(h.key.doc), "sgd, rmsprop, lars: momentum factor");
    }
  }
}

// training.cuda_graph's rule reads a row's steps_on_device, and the captured step calls the optimizer as a
// CapturableStep: the row takes the fact from the class its factory makes, so the two cannot disagree.
TEST(OptimizerRows, ARowStepsOnTheDeviceExactlyWhenItsOptimizerIsACapturableStep) {
  int64_t on_device = 0;
  for (const OptimizerKind* kind : optimizer_kinds()) {
    OptimizerConfig cfg;
    cfg.name.name = std::string(kind->keys.name);
    torch::nn::Linear model(3, 2);
    const auto opt = kind->make(cfg, 0.01, {ParamGroup{{"weight", "bias"}, model->parameters(), 0.0}});
    EXPECT_EQ(dynamic_cast<CapturableStep*>(opt.get()) != nullptr, kind->keys.steps_on_device) << kind->keys.name;
    on_device += kind->keys.steps_on_device;
  }
  EXPECT_GE(on_device, 1) << "sgd's fused step is captured";
}

TEST(OptimizerRows, ABoolKeyOfAnotherOptimizerAndFusedWithoutAFusedKernelAreConfigErrors) {
  auto error = [](const std::string& toml) {
    try {
      parse_config(toml, "f.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("[optimizer]\nname = \"sgd\"\namsgrad = true\n"),
            "f.toml:3:11: optimizer.amsgrad is taken by optimizer.name = \"adamw\" or \"adam\", not \"sgd\"; set "
            "amsgrad = false or another optimizer.name");
  EXPECT_EQ(error("[optimizer]\nname = \"adam\"\namsgrad = true\nbeta1 = 0.8\n"), "(no error)");
  EXPECT_NE(error("[optimizer]\nname = \"adan\"\n").find("did you mean \"adam\"?"), std::string::npos);
  EXPECT_EQ(error("[optimizer]\nname = \"sgd\"\ncentered = true\n"),
            "f.toml:3:12: optimizer.centered is taken by optimizer.name = \"rmsprop\", not \"sgd\"; set centered = "
            "false or another optimizer.name");
  // A bool key that is on by default (timm's Lamb's bias_correction) is another optimizer's when turned off.
  EXPECT_EQ(error("[optimizer]\nname = \"sgd\"\nbias_correction = false\n"),
            "f.toml:3:19: optimizer.bias_correction is taken by optimizer.name = \"lamb\", not \"sgd\"; set "
            "bias_correction = true or another optimizer.name");
  EXPECT_EQ(error("[optimizer]\nname = \"lamb\"\nbias_correction = false\ntrust_clip = true\n"), "(no error)");
  EXPECT_EQ(error("[optimizer]\nname = \"rmsprop\"\nfused = true\n"),
            "f.toml:3:9: torch.optim.RMSprop has no fused implementation in torch.optim; set optimizer.fused = false");
  EXPECT_EQ(error("[optimizer]\nname = \"rmsprop\"\ncentered = true\nmomentum = 0.9\nalpha = 0.9\n"), "(no error)");
  EXPECT_NE(error("[optimizer]\nname = \"rmsprop\"\nalpha = 1.5\n").find("optimizer.alpha must be >= 0.0 and <= 1.0"),
            std::string::npos);
  EXPECT_NE(error("[optimizer]\nname = \"rmsprops\"\n").find("did you mean \"rmsprop\"?"), std::string::npos);
}

// Three steps of the row's optimizer with every bool key on and momentum 0.9 (so that every kind of state exists).
std::unique_ptr<torch::optim::Optimizer> stepped(const OptimizerKind& kind, torch::nn::Linear& model) {
  OptimizerConfig cfg;
  cfg.name.name = std::string(kind.keys.name);
  for (const HyperparameterKey& h : kind.keys.keys) {
    if (h.flag) cfg.hyper.set(h.key.name, true);
    if (std::string(h.key.name) == "momentum") cfg.hyper.set("momentum", 0.9);
  }
  auto opt = make_optimizer(cfg, 0.01, model->parameters());
  torch::manual_seed(4);
  for (int step = 0; step < 3; ++step) {
    opt->zero_grad();
    model->forward(torch::randn({5, 3})).pow(2).sum().backward();
    opt->step();
  }
  return opt;
}

TEST(OptimizerRows, EachRowsStateRoundTripsThroughItsTorchOptimClassAndOnlyItsRowRecognisesIt) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  // Each row's state after its steps, saved for the oracle, which round-trips every row's file in one process.
  std::vector<c10::impl::GenericDict> states;
  std::string round_trip_files;
  for (const OptimizerKind* kind : optimizer_kinds()) {
    const std::string name(kind->keys.name);
    SCOPED_TRACE(name);
    torch::manual_seed(1);
    torch::nn::Linear model(3, 2);
    const auto opt = stepped(*kind, model);
    states.push_back(optimizer_state_dict(*opt));
    const c10::impl::GenericDict& state = states.back();
    std::vector<std::string> recognised = optimizers_from_param_groups(state);
    EXPECT_EQ(recognised, std::vector<std::string>{name});

    c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
    file.insert("optimizer", state);
    file.insert("torch_class", std::string(kind->keys.torch_name));
    c10::impl::GenericList shapes(c10::AnyType::get());
    for (const auto& p : model->parameters()) shapes.push_back(c10::IValue(p.sizes().vec()));
    file.insert("shapes", shapes);
    const std::vector<char> bytes = torch_save_bytes(file);
    std::ofstream(dir / (name + ".ours.pt"), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    round_trip_files += " " + shell_quote(dir / (name + ".ours.pt")) + " " + shell_quote(dir / (name + ".theirs.pt"));
  }
  const auto py =
      run_command(python() + " " + source_dir() + "/tests/python/optimizer_round_trip.py" + round_trip_files);
  ASSERT_EQ(py.exit_code, 0) << py.output;

  size_t row = 0;
  for (const OptimizerKind* kind : optimizer_kinds()) {
    const std::string name(kind->keys.name);
    SCOPED_TRACE(name);
    EXPECT_NE(py.output.find(dir / (name + ".ours.pt") + " layout_equal True"), std::string::npos) << py.output;
    EXPECT_NE(py.output.find(dir / (name + ".ours.pt") + " values_equal True"), std::string::npos) << py.output;

    // PyTorch's state_dict() loads into a fresh optimizer of the row with no hyperparameter difference, and the
    // state it then writes is the one it was given.
    torch::nn::Linear fresh_model(3, 2);
    auto fresh = stepped(*kind, fresh_model);
    const c10::IValue theirs = read_torch_save_file(dir / (name + ".theirs.pt"));
    ASSERT_TRUE(theirs.isGenericDict());
    EXPECT_EQ(load_optimizer_state_dict(*fresh, theirs.toGenericDict()), std::vector<std::string>{});
    const c10::impl::GenericDict again = optimizer_state_dict(*fresh);
    const c10::IValue &a = states[row++].at("state"), &b = again.at("state");
    ASSERT_EQ(a.toGenericDict().size(), b.toGenericDict().size());
    for (const auto& entry : a.toGenericDict()) {
      const auto ours = entry.value().toGenericDict(), back = b.toGenericDict().at(entry.key()).toGenericDict();
      ASSERT_EQ(ours.size(), back.size());
      for (const auto& field : ours)
        EXPECT_TRUE(torch::equal(field.value().toTensor(), back.at(field.key()).toTensor()))
            << entry.key().toInt() << "." << field.key().toStringRef();
    }
  }
}

}  // namespace
}  // namespace ddp::test
