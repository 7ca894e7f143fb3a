// SampleLog: metrics.sample_ids, the dataset indices each rank trained on in every optimizer step.
#pragma once

#include "report/jsonl_writer.h"

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// One line per optimizer step in job.out_dir/samples/rank-R.jsonl: {"step", "epoch", "rank", "world_size",
// "samples": [dataset indices]}. The file is appended to across resumes, so steps a resumed run repeats appear again
// (the later line is the one in the weights). Disabled, it writes nothing.
class SampleLog {
 public:
  SampleLog(bool enabled, const std::string& out_dir, int64_t rank, int64_t world_size);
  void step(int64_t step, int64_t epoch, c10::ArrayRef<int64_t> samples);

 private:
  JsonlWriter out_;
  int64_t rank_, world_size_;
};

}  // namespace ddp
