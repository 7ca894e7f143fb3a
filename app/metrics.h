// Metrics output: JSON-lines records (metrics.jsonl) built field by field.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace ddp {

// One JSON object, fields kept in insertion order.
class JsonRecord {
 public:
  JsonRecord& add(const std::string& key, const std::string& value);
  JsonRecord& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonRecord& add(const std::string& key, double value);
  JsonRecord& add(const std::string& key, int64_t value);
  JsonRecord& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonRecord& add(const std::string& key, bool value);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::string json_quote(const std::string& s);
// Shortest decimal that reads back to the same double; non-finite values become null.
std::string json_number(double v);

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
