// JsonlWriter: metrics.jsonl, one JsonRecord a line, flushed as written; drop_records_after for a resume.
#pragma once

#include "base/json_record.h"

#include <cstdint>
#include <fstream>
#include <string>

namespace ddp {

// Appends records to a .jsonl file, flushing each line.
class JsonlWriter {
 public:
  JsonlWriter() = default;
  explicit JsonlWriter(const std::string& path);
  bool is_open() const { return out_.is_open(); }
  void write(const JsonRecord& r);

 private:
  std::ofstream out_;
  std::string path_;
};

// Drops the records of the JSON-lines file at `path` whose "step" is past `step` (what an interrupted run logged after
// the checkpoint a resume continues from) and an unfinished last line, rewriting the file atomically where any was
// there; records without a step stay. Nothing where the file is absent.
void drop_records_after(const std::string& path, int64_t step);

}  // namespace ddp
