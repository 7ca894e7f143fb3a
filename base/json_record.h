// JsonRecord: one JSON object built field by field (metrics.jsonl lines, checkpoint manifests).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
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
  JsonRecord& add(const std::string& key, const std::vector<int64_t>& values);  // a JSON array
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::string json_quote(const std::string& s);
// Shortest decimal that reads back to the same double; non-finite values become null.
std::string json_number(double v);

}  // namespace ddp
