// Tests for the ddptrain command line: exit codes and the single error line, run on the real binary.
#include "app/config.h"
#include "data/idx.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
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

// --version against the venv's PyTorch: the same LibTorch version, and on a CUDA build the same CUDA, cuDNN and NCCL
// versions that torch.version.cuda, torch.backends.cudnn.version() and torch.cuda.nccl.version() report, and the
// same number of GPUs torch.cuda.device_count() sees.
TEST(CliOk, VersionMatchesTheLibTorchItRunsOn) {
  test::TempDir dir;
  auto r = ddptrain_in(dir.path(), "--version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("ddptrain ", 0), 0u) << r.output;
  if (!test::python_has_torch()) GTEST_SKIP() << test::python() << " cannot import torch";
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
  auto r = ddptrain_in(dir.path(), "ok.toml --data.dir=" + shell_quote(dir / "mnist") +
                                       " --job.out_dir=" + shell_quote(dir / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_one_error(r, "error: " + labels + ": ");
}

}  // namespace
}  // namespace ddp
