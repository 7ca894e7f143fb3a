// JsonRecord: JSON text of strings, numbers and booleans.
#include "base/json_record.h"

#include "base/number_text.h"

#include <cmath>
#include <cstdio>

namespace ddp {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? shortest_number(v) : "null"; }

JsonRecord& JsonRecord::add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, json_quote(value));
  return *this;
}
JsonRecord& JsonRecord::add(const std::string& key, double value) {
  fields_.emplace_back(key, json_number(value));
  return *this;
}
JsonRecord& JsonRecord::add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}
JsonRecord& JsonRecord::add(const std::string& key, const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  fields_.emplace_back(key, text + "]");
  return *this;
}
JsonRecord& JsonRecord::add(const std::string& key, bool value) {
  fields_.emplace_back(key, value ? "true" : "false");
  return *this;
}

std::string JsonRecord::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    out += (i ? "," : "") + json_quote(fields_[i].first) + ":" + fields_[i].second;
  return out + "}";
}

}  // namespace ddp
