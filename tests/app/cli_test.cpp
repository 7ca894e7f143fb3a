// Tests for the ddptrain command line: exit codes and the single error line, run on the real binary.
#include "config/config.h"
#include "data/idx.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ddp {
namespace {

using test::shell_quote;

// Runs ddptrain with `args` (already quoted) from `dir`, so a relative config path reads as written.
test::CommandResult ddptrain_in(const std::string& dir, const std::string& args) {
  return test::run_command("cd " + shell_quote(dir) + " && " + shell_quote(test::ddptrain_path()) + " " + args);
}

std::vector<std::string> error_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.find("error:") != std::string::npos) lines.push_back(line);
  return lines;
}

// Exactly one error line, starting with `prefix`.
void expect_one_error(const test::CommandResult& r, const std::string& prefix) {
  auto lines = error_lines(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_EQ(lines[0].rfind(prefix, 0), 0u) << "line: " << lines[0] << "\nexpected prefix: " << prefix;
}

TEST(CliErrors, BadConfigExitsTwoWithOneLocatedErrorLine) {
  test::TempDir dir;
  test::write_file(dir / "bad.toml", "[job]\nname = \"x\"\n[data]\nbatch_size = 0\n");
  auto r = ddptrain_in(dir.path(), "bad.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: bad.toml:4:14: data.batch_size");
}

TEST(CliErrors, NearMissKeyNamesTheKeyAndSuggests) {
  test::TempDir dir;
  test::write_file(dir / "bad.toml", "[data]\nbatchsize = 8\n");
  auto r = ddptrain_in(dir.path(), "bad.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: bad.toml:2:1: unknown key data.batchsize; did you mean data.batch_size?");
}

TEST(CliErrors, BadOverrideExitsTwo) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "");
  auto r = ddptrain_in(dir.path(), "ok.toml --data.batch_size=abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: --data.batch_size=abc: data.batch_size must be an integer");
  r = ddptrain_in(dir.path(), "ok.toml --batch_size=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: --batch_size=3: ");
  EXPECT_NE(r.output.find("did you mean --data.batch_size=3?"), std::string::npos) << r.output;
}

TEST(CliErrors, MultiLineOverrideStillGivesOneErrorLine) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "");
  auto r = ddptrain_in(dir.path(), "ok.toml " + shell_quote("--data.batch_size=3\n[job]\nseed=-1"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: --data.batch_size=3 [job] seed=-1: ");
}

TEST(CliErrors, UnknownFlagExitsTwo) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "");
  auto r = ddptrain_in(dir.path(), "ok.toml --bogus");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: --bogus: unknown option");
  r = ddptrain_in(dir.path(), "ok.toml -x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: -x: unknown option");
}

TEST(CliErrors, MissingConfigArgumentExitsTwoWithUsage) {
  test::TempDir dir;
  auto r = ddptrain_in(dir.path(), "");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: missing CONFIG.toml argument");
  EXPECT_NE(r.output.find("usage: ddptrain CONFIG.toml"), std::string::npos) << r.output;
}

TEST(CliErrors, SecondPositionalArgumentExitsTwo) {
  test::TempDir dir;
  test::write_file(dir / "a.toml", "");
  auto r = ddptrain_in(dir.path(), "a.toml b.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: b.toml: unexpected argument");
}

TEST(CliErrors, NonexistentOrDirectoryConfigExitsTwo) {
  test::TempDir dir;
  auto r = ddptrain_in(dir.path(), "nope.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: nope.toml: cannot open config file");
  std::filesystem::create_directories(dir / "sub");
  r = ddptrain_in(dir.path(), "sub");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_one_error(r, "error: sub: is a directory");
}

TEST(CliOk, PrintConfigPrintsEveryKeyAndParsesBack) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "[optimizer]\nlr = 0.5\n");
  auto r = ddptrain_in(dir.path(), "ok.toml --print-config --model.name=resnet18 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[data]\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nbatch_size = 64\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nlr = 0.5\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[model]\nname = \"resnet18\"\n"), std::string::npos) << r.output;
  // The printed config is the resolved one: reading it back prints the same text.
  Config printed = parse_config(r.output, "printed.toml");
  EXPECT_EQ(format_config(printed), r.output);
  EXPECT_EQ(r.output, format_config(parse_config("[optimizer]\nlr = 0.5\n", "ok.toml", {"model.name=resnet18"})));
}

TEST(CliOk, HelpExitsZeroWithUsage) {
  test::TempDir dir;
  for (const char* flag : {"--help", "-h"}) {
    auto r = ddptrain_in(dir.path(), flag);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("usage: ddptrain CONFIG.toml"), std::string::npos) << r.output;
    EXPECT_TRUE(error_lines(r.output).empty()) << r.output;
  }
}

// The resolved config ddptrain prints for `args` run from `dir` (exit 0 asserted by the caller).
test::CommandResult printed_config(const test::TempDir& dir, const std::string& args) {
  return ddptrain_in(dir.path(), args + " --print-config 2>&1");
}

// torchtitan's forms: --a.b VALUE takes the next argument, with the config path before or after; the result equals
// the --a.b=VALUE form and what load_config makes of the same overrides.
TEST(CliOverrides, ValueAsTheNextArgumentEqualsTheEqualsForm) {
  test::TempDir dir;
  const std::string toml = "[optimizer]\nlr = 0.5\n";
  test::write_file(dir / "ok.toml", toml);
  auto spaced =
      printed_config(dir, "--data.batch_size 7 ok.toml --model.name resnet18 --data.mirrors '[\"a\", \"b\"]'");
  ASSERT_EQ(spaced.exit_code, 0) << spaced.output;
  auto equals =
      printed_config(dir, "ok.toml --data.batch_size=7 --model.name=resnet18 --data.mirrors='[\"a\", \"b\"]'");
  ASSERT_EQ(equals.exit_code, 0) << equals.output;
  EXPECT_EQ(spaced.output, equals.output);
  EXPECT_EQ(spaced.output,
            format_config(parse_config(toml, "ok.toml",
                                       {"data.batch_size=7", "model.name=resnet18", "data.mirrors=[\"a\", \"b\"]"})));
  EXPECT_NE(spaced.output.find("\nbatch_size = 7\n"), std::string::npos) << spaced.output;
  EXPECT_NE(spaced.output.find("\nlr = 0.5\n"), std::string::npos) << spaced.output;  // the file was read
}

// A bool key alone is true; a following true/false is its value; anything else (the config path) is not taken.
TEST(CliOverrides, BareBoolFlagIsTrueAndLeavesTheConfigPathAlone) {
  test::TempDir dir;
  test::write_file(dir / "on.toml", "[training]\ndeterministic = true\n[optimizer]\nlr = 0.25\n");
  test::write_file(dir / "off.toml", "[optimizer]\nlr = 0.125\n");
  auto value_of = [&](const std::string& args, const std::string& key) {
    auto r = printed_config(dir, args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    const std::string needle = "\n" + key + " = ";
    size_t at = r.output.find(needle);
    if (at == std::string::npos) return std::string("<missing>");
    at += needle.size();
    return r.output.substr(at, r.output.find('\n', at) - at);
  };
  EXPECT_EQ(value_of("--training.deterministic off.toml", "deterministic"), "true");
  EXPECT_EQ(value_of("--training.deterministic off.toml", "lr"), "0.125");  // off.toml is the config
  EXPECT_EQ(value_of("off.toml --training.deterministic", "deterministic"), "true");
  EXPECT_EQ(value_of("--training.deterministic false on.toml", "deterministic"), "false");
  EXPECT_EQ(value_of("--training.deterministic false on.toml", "lr"), "0.25");
  EXPECT_EQ(value_of("on.toml --training.deterministic false", "deterministic"), "false");
  EXPECT_EQ(value_of("off.toml --training.deterministic true", "deterministic"), "true");
  EXPECT_EQ(value_of("on.toml --training.deterministic=false", "deterministic"), "false");
  EXPECT_EQ(value_of("--metrics.tensorboard --training.deterministic off.toml", "tensorboard"), "true");
  // A bool/auto key alone is true too, and also takes a following "auto".
  EXPECT_EQ(value_of("--training.cudnn_benchmark off.toml", "cudnn_benchmark"), "true");
  EXPECT_EQ(value_of("--training.cudnn_benchmark false off.toml", "cudnn_benchmark"), "false");
  EXPECT_EQ(value_of("off.toml --training.cudnn_benchmark auto", "cudnn_benchmark"), "\"auto\"");
  EXPECT_EQ(value_of("off.toml", "cudnn_benchmark"), "\"auto\"");
}

// ddptrain `args` run from `dir` exits 2 with one error line starting with `prefix`.
void expect_usage_error(const test::TempDir& dir, const std::string& args, const std::string& prefix) {
  auto r = ddptrain_in(dir.path(), args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  expect_one_error(r, prefix);
}

TEST(CliOverrides, UnknownOrValuelessKeysExitTwo) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "");
  expect_usage_error(dir, "--data.batchsize 7 ok.toml",
                     "error: --data.batchsize: unknown key data.batchsize; did you mean data.batch_size?");
  expect_usage_error(dir, "ok.toml --trainig.deterministic",
                     "error: --trainig.deterministic: unknown section [trainig]; did you mean [training]?");
  expect_usage_error(dir, "ok.toml --data.batch_size", "error: --data.batch_size: needs a value");
  expect_usage_error(dir, "ok.toml --model.name --print-config",
                     "error: --model.name: needs a value, got option --print-config");
  expect_usage_error(dir, "ok.toml --data.batch_size seven",
                     "error: --data.batch_size=seven: data.batch_size must be an integer");
  // A second positional after a bare flag is still the "unexpected argument" error (not taken as the value).
  test::write_file(dir / "other.toml", "");
  expect_usage_error(dir, "--training.deterministic ok.toml other.toml", "error: other.toml: unexpected argument");
  // The next argument is taken even when it starts with '-' (a negative number), and checked as the key's value.
  expect_usage_error(dir, "ok.toml --optimizer.lr -0.5",
                     "error: --optimizer.lr=-0.5: optimizer.lr must be > 0.0 and <= 100.0, got -0.5");
}

// A retired key is read and ignored in both forms of an override, --k=V and --k V (the config path after it stays the
// config path).
TEST(CliOverrides, ARetiredKeyIsIgnoredInEitherForm) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "[optimizer]\nlr = 0.25\n");
  const auto plain = printed_config(dir, "ok.toml");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  for (const char* args : {"--job.step_memory planned ok.toml", "ok.toml --job.step_memory planned",
                           "ok.toml --job.step_memory=planned"}) {
    const auto r = printed_config(dir, args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output, plain.output) << args;
  }
}

// A value or key with a line break in it (a quoted TOML string, an override from a script) is shown as \n: the error
// is still one line.
TEST(CliOverrides, ALineBreakInAValueStaysInTheOneErrorLine) {
  test::TempDir dir;
  test::write_file(dir / "name.toml", "[model]\nname = \"net\\nx\"\n");
  expect_usage_error(dir, "name.toml", "error: name.toml:2:8: model.name must be one of");
  const auto r = ddptrain_in(dir.path(), "name.toml");
  EXPECT_NE(r.output.find("got \"net\\nx\""), std::string::npos) << r.output;
  test::write_file(dir / "key.toml", "[data]\n\"batch\\nsize\" = 8\n");
  expect_usage_error(dir, "key.toml", "error: key.toml:2:1: unknown key data.batch\\nsize");
  test::write_file(dir / "ok.toml", "");
  expect_usage_error(dir, "ok.toml '--batch_size=8\nx'", "error: --batch_size=8 x: ");
  const auto hint = ddptrain_in(dir.path(), "ok.toml '--batch_size=8\nx'");
  EXPECT_NE(hint.output.find("--data.batch_size=8\\nx"), std::string::npos) << hint.output;
}

// The type name --help shows for each kind of key.
const std::map<KeyKind, std::string> kHelpTypeNames = {
    {KeyKind::Bool, "bool"},           {KeyKind::Int, "int"},   {KeyKind::Float, "float"},
    {KeyKind::Floats, "floats"},       {KeyKind::Ints, "ints"}, {KeyKind::String, "string"},
    {KeyKind::Choice, "choice"},       {KeyKind::List, "list"}, {KeyKind::IntOrAuto, "int/auto"},
    {KeyKind::BoolOrAuto, "bool/auto"}};

// "section.key" -> value as --print-config writes a default Config.
std::map<std::string, std::string> default_values() {
  std::map<std::string, std::string> values;
  std::istringstream in(format_config(Config{}));
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[", 0) == 0) section = line.substr(1, line.size() - 2);
    size_t eq = line.find(" = ");
    if (eq != std::string::npos) values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return values;
}

// The --help line of a key ("  section.key  TYPE  default ..."), or "" when there is none.
std::string help_line(const std::string& help, const std::string& key) {
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  " + key + " ", 0) == 0) return line;
  return "";
}

TEST(CliOk, HelpListsEveryKeyWithTypeDefaultAndRange) {
  test::TempDir dir;
  auto r = ddptrain_in(dir.path(), "--help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto defaults = default_values();
  size_t keys = 0;
  std::string section;
  for (const KeyInfo& f : describe_keys(Config{})) {
    if (f.section != section) {
      EXPECT_NE(r.output.find("\n[" + f.section + "]\n"), std::string::npos) << f.section;
    }
    section = f.section;
    const std::string key = f.section + "." + f.name;
    const std::string line = help_line(r.output, key);
    ASSERT_FALSE(line.empty()) << "no --help line for " << key << "\n" << r.output;
    ++keys;
    std::istringstream words(line);
    std::string name, type;
    words >> name >> type;
    EXPECT_EQ(type, kHelpTypeNames.at(f.kind)) << line;
    ASSERT_TRUE(defaults.count(key)) << key;
    EXPECT_NE(line.find(" default " + defaults.at(key)), std::string::npos) << line;
    if (f.kind == KeyKind::Int || f.kind == KeyKind::Float || f.kind == KeyKind::Floats || f.kind == KeyKind::Ints ||
        f.kind == KeyKind::IntOrAuto) {  // every number: both bounds
      EXPECT_NE(line.find("range: "), std::string::npos) << line;
      EXPECT_NE(line.find(" and <"), std::string::npos) << line;
    }
    for (const auto& choice : f.choices) EXPECT_NE(line.find(" " + choice), std::string::npos) << line;
  }
  EXPECT_GE(keys, 60u);
  EXPECT_NE(help_line(r.output, "data.workers").find("range: >= 0 and <= 64, or auto"), std::string::npos) << r.output;
  EXPECT_NE(help_line(r.output, "optimizer.lr").find("range: > 0.0 and <= 100.0"), std::string::npos) << r.output;
  EXPECT_NE(help_line(r.output, "data.std").find("range: -1.0 (the dataset's default) or > 0.0 and <= 1000.0"),
            std::string::npos)
      << r.output;
  EXPECT_NE(help_line(r.output, "dist.timeout_s").find("range: >= 0.001 and <= 604800.0"), std::string::npos);
  EXPECT_NE(help_line(r.output, "optimizer.beta2").find("range: >= 0.0 and < 1.0"), std::string::npos) << r.output;
  EXPECT_NE(help_line(r.output, "metrics.progress").find("one of: auto | bar | plain | off"), std::string::npos);
  EXPECT_NE(
      help_line(r.output, "training.cudnn_benchmark").find("bool/auto default \"auto\"  one of: true | false | auto"),
      std::string::npos)
      << r.output;
  EXPECT_NE(help_line(r.output, "checkpoint.resume").find("one of: auto | never or a path"), std::string::npos);
  EXPECT_EQ(help_line(r.output, "job.name").find("range"), std::string::npos);
  // Keys resolved from others when unset say what the defaults resolve to (--print-config of an empty file).
  Config resolved = parse_config("", "empty.toml");
  EXPECT_NE(help_line(r.output, "checkpoint.dir").find("resolves to \"" + resolved.checkpoint.dir + "\""),
            std::string::npos)
      << r.output;
}

// --version against the venv's PyTorch: the same LibTorch version, and on a CUDA build the same CUDA, cuDNN and NCCL
// versions that torch.version.cuda, torch.backends.cudnn.version() and torch.cuda.nccl.version() report, and the
// same number of GPUs torch.cuda.device_count() sees.
TEST(CliOk, VersionMatchesTheLibTorchItRunsOn) {
  test::TempDir dir;
  auto r = ddptrain_in(dir.path(), "--version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("ddptrain ", 0), 0u) << r.output;
  if (!test::python_has_torch()) GTEST_SKIP() << test::python() << " does not have torch";
  auto py = test::run_command(
      shell_quote(test::python()) +
      " -c 'import torch; v = torch.__version__.split(\"+\")[0]; print(\"LibTorch \" + v)\n"
      "if torch.version.cuda:\n"
      "    c = torch.backends.cudnn.version(); n = torch.cuda.nccl.version()\n"
      "    print(\"CUDA %s | cuDNN %d.%d.%d | NCCL %d.%d.%d\" % ((torch.version.cuda, c // 10000, c % 10000 // 100, "
      "c % 100) + tuple(n)))\n"
      "print(\"GPUs visible: %d\" % torch.cuda.device_count())'");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  std::istringstream expected(py.output);
  const bool cuda_path = r.output.find("(compiled in)") != std::string::npos;  // not with DDP_WITH_CUDA=OFF
  for (std::string line; std::getline(expected, line);) {
    if (!cuda_path && line.rfind("CUDA ", 0) == 0) continue;
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing \"" << line << "\" in\n" << r.output;
  }
}

// ldd: LibTorch from the venv's torch/lib (or the LibTorch the build was pointed at), and on a CUDA build NCCL
// resolved, nothing missing.
TEST(CliOk, LinksLibTorchAndNcclWithNothingMissing) {
  auto r = test::run_command("ldd " + shell_quote(test::ddptrain_path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("not found"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/torch/lib/libtorch_cpu.so"), std::string::npos) << r.output;
  if (test::run_command(shell_quote(test::ddptrain_path()) + " --version | grep -q NCCL").exit_code == 0) {
    EXPECT_NE(r.output.find("libnccl.so.2 => /"), std::string::npos) << r.output;
  }
}

TEST(CliRuntime, MissingDatasetExitsOneNamingTheFile) {
  test::TempDir dir;
  test::write_file(dir / "ok.toml", "");
  auto r = ddptrain_in(dir.path(), "ok.toml --data.dir=/nonexistent --job.out_dir=" + shell_quote(dir / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_one_error(r, "error: /nonexistent/train-images-idx3-ubyte");
}

TEST(CliRuntime, CorruptDatasetFileExitsOneNamingTheFile) {
  test::TempDir dir;
  test::write_tiny_mnist(dir / "mnist", 8, 4, 1);
  const std::string labels = dir / "mnist/t10k-labels-idx1-ubyte.gz";
  std::string bytes = test::read_file(labels);
  test::write_file(labels, bytes.substr(0, bytes.size() / 2));
  test::write_file(dir / "ok.toml", "[data]\ndataset = \"mnist\"\n");
  auto r = ddptrain_in(
      dir.path(), "ok.toml --data.dir=" + shell_quote(dir / "mnist") + " --job.out_dir=" + shell_quote(dir / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_one_error(r, "error: " + labels + ": ");
}

}  // namespace
}  // namespace ddp
