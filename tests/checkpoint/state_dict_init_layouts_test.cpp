// Tests: model.init_from reads what PyTorch users save (DDP's module.* keys, {"model"/"state_dict": sd}, ddptrain
// checkpoints) like the plain state dict; mismatched files fail with exit 1 and the fix.
#include "tests/checkpoint/state_dict_oracle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

namespace ddp::test {
namespace {

// ddptrain --eval-only on the tiny set in dir/data with init_from = `pt` (progress plain: the banner is printed).
CommandResult eval_only(const TempDir& dir, const std::string& pt, const std::string& model,
                        const std::string& out_name) {
  write_file(dir / "eval.toml", "[job]\nout_dir = \"" + dir / out_name + "\"\nthreads = 1\n\n[data]\n" +
                                    "dataset = \"mnist\"\ndir = \"" + dir / "data" + "\"\n\n[model]\nname = \"" +
                                    model + "\"\n\n[metrics]\nprogress = \"plain\"\n");
  return run_command(shell_quote(ddptrain_path()) + " " + shell_quote(dir / "eval.toml") +
                     " --eval-only --model.init_from=" + shell_quote(pt));
}

// The eval record of OUT/metrics.jsonl without its wall_s (everything that depends on the weights).
std::string eval_record(const std::string& out_dir) {
  const auto lines = read_lines(out_dir + "/metrics.jsonl");
  if (lines.empty()) return "(no metrics.jsonl record)";
  return std::regex_replace(lines.back(), std::regex(",\"wall_s\":[-+0-9.eE]+"), "");
}

TEST(StateDictInitLayouts, PythonLayoutsEvaluateExactlyLikeThePlainStateDict) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  write_tiny_mnist(dir / "data", 32, 64, /*seed=*/5);
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"ddp", "  init_from: DDP state dict, `module.` prefix stripped\n"},
      {"model-dict", "  init_from: checkpoint dict, weights under \"model\"\n"},
      {"state-dict-dict", "  init_from: checkpoint dict, weights under \"state_dict\"\n"},
      {"compiled", "  init_from: torch.compile state dict, `_orig_mod.` prefix stripped\n"},
      {"safetensors", "  init_from: safetensors\n"}};
  std::string commands = "save net " + shell_quote(dir / "init.pt") + " " + shell_quote(dir / "init") + " --seed 7";
  for (const auto& [what, note] : layouts)  // one oracle process writes every file
    commands +=
        " then save-layout " + what + " " + shell_quote(dir / "init.pt") + " " + shell_quote(dir / (what + ".pt"));
  run_oracle(commands);
  const CommandResult plain = eval_only(dir, dir / "init.pt", "net", "plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("init_from:"), std::string::npos) << plain.output;  // nothing to say
  const std::string expected = eval_record(dir / "plain");
  ASSERT_NE(expected.find("\"correct_top5\":"), std::string::npos) << expected;
  for (const auto& [what, note] : layouts) {
    const std::string pt = dir / (what + ".pt");
    const CommandResult r = eval_only(dir, pt, "net", what);
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
    EXPECT_EQ(count_of(r.output, note), 1u) << what << "\n" << r.output;
    EXPECT_EQ(eval_record(dir / what), expected) << what;
  }
}

TEST(StateDictInitLayouts, DdptrainCheckpointLoadsLikeItsModelPt) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 48, /*seed=*/6);
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"job.out_dir=" + dir / "train", "job.threads=1", "data.batch_size=16", "training.max_steps=3",
                       "checkpoint.every_steps=3", "checkpoint.dir=" + dir / "ck", "metrics.progress=off"});
  const CommandResult train = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string checkpoint = dir / "ck/step-00000003.pt";
  ASSERT_TRUE(std::filesystem::exists(checkpoint)) << train.output;
  const CommandResult from_model = eval_only(dir, dir / "train/model.pt", "net", "from-model");
  ASSERT_EQ(from_model.exit_code, 0) << from_model.output;
  const CommandResult from_checkpoint = eval_only(dir, checkpoint, "net", "from-checkpoint");
  ASSERT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.output;
  EXPECT_EQ(count_of(from_checkpoint.output, "  init_from: checkpoint dict, weights under \"model\"\n"), 1u)
      << from_checkpoint.output;
  EXPECT_EQ(eval_record(dir / "from-checkpoint"), eval_record(dir / "from-model"));
}

TEST(StateDictInitLayouts, MismatchedFilesExitOneWithTheFix) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  write_tiny_mnist(dir / "data", 32, 16, /*seed=*/7);
  std::string commands = "save net " + shell_quote(dir / "init.pt") + " " + shell_quote(dir / "init");
  for (const std::string what : {"prefixed", "nested", "ddp"})  // one oracle process writes every file
    commands +=
        " then save-layout " + what + " " + shell_quote(dir / "init.pt") + " " + shell_quote(dir / (what + ".pt"));
  run_oracle(commands + " then save resnet18 " + shell_quote(dir / "resnet18.pt") + " " + shell_quote(dir / "r") +
             " then save tensors " + shell_quote(dir / "tensors.pt") + " " + shell_quote(dir / "t"));
  struct Case {
    std::string file, model, fix;
  };
  const std::vector<Case> cases = {
      {"prefixed.pt", "net",
       "; hint: every key starts with `model.`, the model's keys do not: save it without the prefix, "
       "torch.save({k.removeprefix(\"model.\"): v for k, v in sd.items()}, PATH)\n"},
      {"nested.pt", "net",
       ": the weights are nested under \"net\" (model.init_from looks under \"model\" or \"state_dict\"): save that "
       "entry alone, torch.save(checkpoint[\"net\"], \"" +
           dir / "nested.pt" + "\")\n"},
      {"resnet18.pt", "net", "; hint: the keys are those of model.name = \"resnet18\" (--model.name=resnet18)\n"},
      {"ddp.pt", "resnet18", "; hint: the keys are those of model.name = \"net\" (--model.name=net)\n"},
      {"tensors.pt", "net",
       "; hint: only 0 of the model's 8 keys are in the file: it looks like a different architecture than "
       "model.name = \"net\"\n"}};
  for (const Case& c : cases) {
    const CommandResult r = eval_only(dir, dir / c.file, c.model, "bad");
    EXPECT_EQ(r.exit_code, 1) << c.file << "\n" << r.output;
    EXPECT_NE(r.output.find("error: " + dir / c.file), std::string::npos) << c.file << "\n" << r.output;
    EXPECT_NE(r.output.find(c.fix), std::string::npos) << c.file << " lacks\n" << c.fix << "in\n" << r.output;
  }
}

}  // namespace
}  // namespace ddp::test
