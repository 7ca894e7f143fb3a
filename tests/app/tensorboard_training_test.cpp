// TensorBoard from a real run: every metrics.jsonl scalar recovered by an independent reader.
//
// The reader (protoc + python3-protobuf) finds them under the documented tags, at float32 precision.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

namespace ddp::test {
namespace {

TEST(TensorBoardTraining, EventFileHoldsTheSameScalarsAsMetricsJsonl) {
  if (run_command(python() + " -c 'import google.protobuf' && command -v protoc").exit_code != 0)
    GTEST_SKIP() << "python3-protobuf or protoc missing";
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 128, 32, 19,
                     {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.epochs=2",
                      "metrics.log_every_steps=3", "metrics.tensorboard=true"});
  auto r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string event_file;
  for (const auto& e : std::filesystem::directory_iterator(dir / "out/tensorboard"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) event_file = e.path().string();
  ASSERT_FALSE(event_file.empty());
  auto read = run_command(python() + " " + source_dir() + "/tests/python/tfevents_reader.py " + event_file);
  ASSERT_EQ(read.exit_code, 0) << read.output;
  // tag -> step -> value from the event file.
  std::map<std::string, std::map<int64_t, double>> tb;
  std::istringstream in(read.output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind, tag;
    int64_t step;
    double value;
    if (f >> kind >> tag >> step >> value && kind == "scalar") tb[tag][step] = value;
  }
  auto field = [](const std::string& l, const std::string& key) {
    std::smatch m;
    std::regex re("\"" + key + "\":([-0-9.eE+]+)");
    return std::regex_search(l, m, re) ? std::stod(m[1]) : -1.0;
  };
  int train_records = 0, eval_records = 0;
  for (const auto& l : read_lines(dir / "out/metrics.jsonl")) {
    const int64_t step = static_cast<int64_t>(field(l, "step"));
    const bool train = l.find("\"kind\":\"train\"") != std::string::npos;
    const std::vector<std::pair<std::string, std::string>> pairs =
        train ? std::vector<std::pair<std::string, std::string>>{{"train/loss", "loss"},
                                                                 {"train/accuracy", "accuracy"},
                                                                 {"lr", "lr"},
                                                                 {"amp/loss_scale", "loss_scale"},
                                                                 {"perf/samples_per_s", "samples_per_s"}}
              : std::vector<std::pair<std::string, std::string>>{{"eval/loss", "loss"}, {"eval/accuracy", "accuracy"}};
    (train ? train_records : eval_records)++;
    for (const auto& [tag, key] : pairs) {
      ASSERT_TRUE(tb[tag].count(step)) << tag << " step " << step << "\n" << read.output;
      EXPECT_EQ(static_cast<float>(tb[tag][step]), static_cast<float>(field(l, key))) << tag << " step " << step;
    }
  }
  EXPECT_GE(train_records, 4);
  EXPECT_EQ(eval_records, 2);
  EXPECT_EQ(tb["train/loss"].size(), static_cast<size_t>(train_records));
}

}  // namespace
}  // namespace ddp::test
