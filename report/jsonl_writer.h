// JsonlWriter: metrics.jsonl, one JsonRecord a line, flushed as written.
#pragma once

#include "base/json_record.h"

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

}  // namespace ddp
