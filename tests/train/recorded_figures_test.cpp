// Figures a training step records by name where it computes them (StepRecord::figures): param_norm is the global L2
// norm of the parameters the logged step left, grad_norm that of its gradients.
#include "checkpoint/state_dict.h"
#include "optim/gradients.h"
#include "tests/support/test_support.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

TEST(RecordedFigures, ParamNormIsTheNormOfTheParametersTheLoggedStepLeft) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 96, 16, 3,
      {"job.out_dir=" + dir / "out", "job.threads=1", "model.name=net", "data.batch_size=8", "training.max_steps=6",
       "training.epochs=0", "metrics.log_every_steps=3", "metrics.progress=off"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<int64_t, nlohmann::json> train;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["kind"] == "train") train[record["step"].get<int64_t>()] = record;
  }
  ASSERT_EQ(train.size(), 2u);
  for (const auto& [step, record] : train) {
    ASSERT_TRUE(record["param_norm"].is_number()) << record.dump();
    ASSERT_TRUE(record["grad_norm"].is_number()) << record.dump();
  }
  // The last logged step is the run's last: model.pt holds the parameters it left (Net has no buffers). The same
  // function over the same float32 values on one thread on both sides gives the same bits.
  std::vector<torch::Tensor> params;
  for (const auto& [name, tensor] : load_state_dict_file(dir / "out/model.pt")) params.push_back(tensor);
  ASSERT_EQ(params.size(), 8u);  // conv1, conv2, fc1, fc2: weight and bias each
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double norm = total_norm(params).item<double>();
  at::set_num_threads(threads);
  EXPECT_EQ(train.at(6)["param_norm"].get<double>(), norm);
  // Training moved them between the two logged steps.
  EXPECT_NE(train.at(3)["param_norm"].get<double>(), norm);
}

}  // namespace
}  // namespace ddp::test
