// SampleLog: each rank's samples of every step as JSON lines.
#include "report/sample_log.h"

#include "base/json_record.h"

namespace ddp {

SampleLog::SampleLog(bool enabled, const std::string& out_dir, int64_t rank, int64_t world_size)
    : rank_(rank), world_size_(world_size) {
  if (enabled) out_ = JsonlWriter(out_dir + "/samples/rank-" + std::to_string(rank) + ".jsonl");
}

void SampleLog::step(int64_t step, int64_t epoch, c10::ArrayRef<int64_t> samples) {
  if (!out_.is_open()) return;  // off: no copy of the step's samples is made
  out_.write(JsonRecord()
                 .add("step", step)
                 .add("epoch", epoch)
                 .add("rank", rank_)
                 .add("world_size", world_size_)
                 .add("samples", samples.vec()));
}

}  // namespace ddp
