// safetensors files (checkpoint/safetensors.h, checkpoint/hub_export.h) against Python's safetensors: its files
// load bit for bit in every dtype, ddptrain's load in it, hostile files end with one line, and a run's output folder
// holds model.safetensors, model_ema.safetensors and config.json; a torchvision ResNet-50 file fine-tunes.
#include "checkpoint/safetensors.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

namespace ddp::test {
namespace {

CommandResult safetensors_oracle(const std::string& args) {
  return run_command(python() + " " + shell_quote(source_dir() + "/tests/python/safetensors_reference.py") + " " +
                     args);
}

bool have_oracle() { return python_has_modules("torch, torchvision, safetensors"); }

std::map<std::string, torch::Tensor> by_name(const NamedTensors& tensors) { return {tensors.begin(), tensors.end()}; }

TEST(Safetensors, PythonFilesLoadBitForBitInEveryDtype) {
  if (!have_oracle()) GTEST_SKIP() << python() << " lacks torch, torchvision or safetensors";
  TempDir dir;
  const CommandResult made = safetensors_oracle("dtypes " + shell_quote(dir.path()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const SafetensorsFile file = read_safetensors(dir / "py.safetensors");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  const auto ours = by_name(file.tensors), theirs = by_name(load_state_dict_file(dir / "py.pt"));
  ASSERT_EQ(ours.size(), theirs.size());
  ASSERT_GE(ours.size(), 13u);
  for (const auto& [name, expected] : theirs) {
    ASSERT_EQ(ours.count(name), 1u) << name;
    const torch::Tensor& t = ours.at(name);
    EXPECT_EQ(t.scalar_type(), expected.scalar_type()) << name;
    EXPECT_EQ(t.sizes(), expected.sizes()) << name;
    EXPECT_TRUE(torch::equal(t, expected)) << name;
  }
  // And back: the same tensors written by ddptrain are the same bits to Python's load_file.
  write_safetensors(dir / "ours.safetensors", file.tensors);
  const CommandResult same =
      safetensors_oracle("same " + shell_quote(dir / "ours.safetensors") + " " + shell_quote(dir / "py.pt"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("same 13"), std::string::npos) << same.output;
}

std::string copies_of(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A file of `header` (its length as the format writes it, or `claimed`) and `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data, uint64_t claimed = UINT64_MAX) {
  const uint64_t length = claimed == UINT64_MAX ? header.size() : claimed;
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>(length >> (8 * i) & 0xff);
  return out + header + data;
}

TEST(Safetensors, HostileFilesEndWithOneLineNamingTheFile) {
  TempDir dir;
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\1');
  struct Case {
    const char* name;
    std::string bytes;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"short", "abc", "shorter than the 8-byte header length"},
      {"length-overflow", safetensors_bytes(f32x2, eight, UINT64_MAX - 1), "over the limit"},
      {"4gb-header", safetensors_bytes(f32x2, eight, 4ull << 30), "over the limit"},
      {"header-past-end", safetensors_bytes(f32x2, eight, 4096), "truncated?"},
      {"truncated-data", safetensors_bytes(f32x2, "1234"), "past the data's 4"},
      {"not-json", safetensors_bytes("{nope", ""), "not valid JSON"},
      {"not-object", safetensors_bytes("[1]", ""), "not a JSON object"},
      {"deep", safetensors_bytes(R"({"a":{"shape":[[[1]]]}})", ""), "nests deeper"},
      {"long-array", safetensors_bytes(R"({"a":{"shape":[1)" + copies_of(",1", 99) + "]}}", ""),
       "more than 64 entries"},
      {"duplicate",
       safetensors_bytes(
           R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})",
           ""),
       "names a tensor twice"},
      {"unknown-dtype",
       safetensors_bytes(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", std::string(16, 'x')),
       "unknown dtype \"F128\""},
      {"negative-shape", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
       "non-negative integers"},
      {"shape-overflow",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd"),
       "overflows 64 bits"},
      {"empty-shape-overflow",  // no bytes, but the strides of its other sides overflow
       safetensors_bytes(
           R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", ""),
       "overflows 64 bits"},
      {"dtype-shape-mismatch", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "need 12"},
      {"overlapping",
       safetensors_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           std::string(12, 'x')),
       "(overlapping)"},
      {"gap",
       safetensors_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
           std::string(20, 'x')),
       "(a gap)"},
      {"out-of-range", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})", eight),
       "begins at byte 16"},
      {"trailing-bytes", safetensors_bytes(f32x2, eight + "extra"), "larger than its header says"},
      {"metadata-not-strings", safetensors_bytes(R"({"__metadata__":{"format":1}})", ""), "is not a string"},
      {"missing-field", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight), "exactly dtype"},
  };
  for (const Case& c : cases) {
    const std::string path = dir / (std::string(c.name) + ".safetensors");
    write_file(path, c.bytes);
    const std::string error = error_of([&] { read_safetensors(path); });
    EXPECT_NE(error.find(path + ": "), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.name << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.name << ": " << error;
  }
  // The well-formed file the cases spoil reads.
  write_file(dir / "good.safetensors", safetensors_bytes(f32x2, eight));
  EXPECT_EQ(read_safetensors(dir / "good.safetensors").tensors.at(0).second.numel(), 2);
  // Through model.init_from: one error line naming the file, no crash.
  TempDir data;
  write_tiny_mnist(data.path(), 32, 16, 1);
  const std::string cfg = write_mnist_job(
      dir, data.path(),
      {"job.out_dir=" + dir / "out", "training.max_steps=1", "model.init_from=" + dir / "overlapping.safetensors"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_GT(r.exit_code, 0) << "killed by a signal:\n" << r.output;
  size_t lines = 0;
  for (const std::string& line : split_lines(r.output)) lines += line.find("error:") != std::string::npos;
  EXPECT_EQ(lines, 1u) << r.output;
  EXPECT_NE(r.output.find("overlapping.safetensors: not a valid safetensors file"), std::string::npos) << r.output;
  // A FIFO is no file of weights: refused, not waited on for a writer.
  ASSERT_EQ(run_command("mkfifo " + dir / "w.pt").exit_code, 0);
  const CommandResult fifo =
      run_command("timeout 60 " + ddptrain_path() + " " + cfg + " --model.init_from=" + dir / "w.pt");
  EXPECT_EQ(fifo.exit_code, 1) << fifo.output;
  EXPECT_NE(fifo.output.find("error: "), std::string::npos) << fifo.output;
  EXPECT_NE(fifo.output.find(dir / "w.pt"), std::string::npos) << fifo.output;
}

// A run writes model.safetensors, model_ema.safetensors (the same bits as model.pt and model_ema.pt to Python's
// safetensors) and config.json (timm's layout) beside model.pt.
TEST(Safetensors, OutputFolderHoldsHubFilesOfTheTrainedWeights) {
  if (!have_oracle()) GTEST_SKIP() << python() << " lacks torch, torchvision or safetensors";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 2);
  const std::string cfg = write_mnist_job(dir, dir / "data",
                                          {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.max_steps=3",
                                           "training.ema_decay=0.9", "metrics.progress=off"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CommandResult same = safetensors_oracle(
      "same " + shell_quote(dir / "out/model.safetensors") + " " + shell_quote(dir / "out/model.pt") + " " +
      shell_quote(dir / "out/model_ema.safetensors") + " " + shell_quote(dir / "out/model_ema.pt"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(split_lines(same.output).size(), 2u) << same.output;
  const nlohmann::json card = nlohmann::json::parse(read_file(dir / "out/config.json"));
  EXPECT_EQ(card.at("architecture"), "net");
  EXPECT_EQ(card.at("num_classes"), 10);
  EXPECT_EQ(card.at("in_chans"), 1);
  EXPECT_FALSE(card.contains("label_names"));  // MNIST files carry no class names
  const nlohmann::json& pre = card.at("pretrained_cfg");
  EXPECT_EQ(pre.at("input_size"), nlohmann::json({1, 28, 28}));
  EXPECT_EQ(pre.at("mean").size(), 1u);
  EXPECT_EQ(pre.at("classifier"), "fc2");
  EXPECT_EQ(pre.at("crop_pct"), 1.0);
}

// Fine-tuning from torchvision's ResNet-50 as a safetensors file (1000 classes) on a two-class folder with
// model.reset_head: every weight but fc's is the file's, fc is new; the output loads strictly into torchvision's
// resnet50(num_classes=2) and config.json names the classes.
TEST(Safetensors, FineTunesFromTorchvisionResNet50WithResetHead) {
  if (!have_oracle()) GTEST_SKIP() << python() << " lacks torch, torchvision or safetensors";
  TempDir dir;
  const std::string weights = dir / "resnet50.safetensors";
  const CommandResult made = safetensors_oracle("torchvision resnet50 1000 4 " + shell_quote(weights));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  write_mixed_image_folder(dir / "folder");
  write_file(dir / "ft.toml",
             "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"image_folder\"\ndir = \"" + dir / "folder" +
                 "\"\nimage_size = 16\nbatch_size = 4\n[model]\nname = \"resnet50\"\ninit_from = \"" + weights +
                 "\"\nreset_head = true\n[optimizer]\nlr = 1e-12\nmomentum = 0.0\n[training]\n"
                 "max_steps = 2\n[metrics]\nprogress = \"plain\"\n");
  const CommandResult r = run_command(ddptrain_path() + " " + dir / "ft.toml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("init_from: safetensors, fc re-initialised (2 of the file's entries left out)"),
            std::string::npos)
      << r.output;
  const auto start = by_name(read_safetensors(weights).tensors);
  const auto tuned = by_name(read_safetensors(dir / "out/model.safetensors").tensors);
  EXPECT_EQ(tuned.at("fc.weight").sizes(), (std::vector<int64_t>{2, 2048}));
  // The file's weights, trained on: two SGD steps at lr 1e-12 move an entry by 2e-12 |grad| (far below float32's
  // resolution for any gradient a 16-pixel batch gives) plus at most half an ulp per step, 1.2e-7 for entries below 2.
  // Weights not loaded from the file (a fresh kaiming init) lie 1e-2 and more away.
  for (const char* name : {"conv1.weight", "layer4.2.conv3.weight", "layer1.0.bn1.weight"})
    EXPECT_LT((tuned.at(name) - start.at(name)).abs().max().item<double>(), 1e-5) << name;
  const CommandResult strict =
      safetensors_oracle("load-strict resnet50 2 " + shell_quote(dir / "out/model.safetensors"));
  EXPECT_EQ(strict.exit_code, 0) << strict.output;
  const nlohmann::json card = nlohmann::json::parse(read_file(dir / "out/config.json"));
  EXPECT_EQ(card.at("label_names"), nlohmann::json({"a", "b"}));
  EXPECT_EQ(card.at("torchvision_model"), "torchvision.models.resnet50");
  EXPECT_EQ(card.at("pretrained_cfg").at("mean").size(), 3u);
}

}  // namespace
}  // namespace ddp::test
