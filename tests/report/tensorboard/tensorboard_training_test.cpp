// TensorBoard from a real run: every metrics.jsonl scalar recovered by TensorBoard's own reader.
//
// PyPI tensorboard's EventAccumulator (tests/python/tb_scalars.py) loads the log directory as `tensorboard --logdir`
// does and finds every scalar under the documented tags, at float32 precision, and nothing more.
#include "tests/report/tensorboard/tensorboard_scalars.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

namespace ddp::test {
namespace {

TEST(TensorBoardTraining, EventFileHoldsTheSameScalarsAsMetricsJsonl) {
  if (!python_has_modules("tensorboard")) GTEST_SKIP() << python() << " does not have tensorboard";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 128, 32, 19,
                                         {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.epochs=2",
                                          "metrics.log_every_steps=3", "metrics.tensorboard=true"});
  auto r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // tag -> step -> value from the event file.
  std::map<std::string, std::map<int64_t, double>> tb;
  for (const auto& s : read_tensorboard_scalars(dir / "out/tensorboard")) tb[s.tag][s.step] = s.value;
  ASSERT_FALSE(tb.empty());
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
                                                                 {"amp/skipped_steps", "skipped_steps"},
                                                                 {"perf/samples_per_s", "samples_per_s"},
                                                                 {"perf/tflops", "tflops"},
                                                                 {"perf/rss_peak_mib", "rss_peak_mib"},
                                                                 {"time/data_s", "time_data_s"},
                                                                 {"time/compute_s", "time_compute_s"},
                                                                 {"time/comm_s", "time_comm_s"},
                                                                 {"time/optimizer_s", "time_optimizer_s"}}
              : std::vector<std::pair<std::string, std::string>>{
                    {"eval/loss", "loss"}, {"eval/accuracy", "accuracy"}, {"eval/accuracy_top5", "accuracy_top5"}};
    (train ? train_records : eval_records)++;
    for (const auto& [tag, key] : pairs) {
      ASSERT_TRUE(tb[tag].count(step)) << tag << " step " << step;
      EXPECT_EQ(static_cast<float>(tb[tag][step]), static_cast<float>(field(l, key))) << tag << " step " << step;
    }
  }
  EXPECT_GE(train_records, 4);
  EXPECT_EQ(eval_records, 2);
  EXPECT_EQ(tb["train/loss"].size(), static_cast<size_t>(train_records));
  EXPECT_EQ(tb["eval/accuracy"].size(), static_cast<size_t>(eval_records));
  EXPECT_EQ(tb["eval/accuracy_top5"].size(), static_cast<size_t>(eval_records));  // 10 classes: top-5 reported
  EXPECT_EQ(tb.size(), 15u);  // the documented tags, nothing else (a CPU run has no perf/gpu_mem_peak_mib)
}

}  // namespace
}  // namespace ddp::test
