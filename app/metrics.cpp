// JSON-lines metrics writer.
#include "app/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

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

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

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

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error(path + ": cannot open for writing: " + std::strerror(errno));
}

void JsonlWriter::write(const JsonRecord& r) {
  if (!out_.is_open()) return;
  out_ << r.str() << "\n";
  out_.flush();
  if (!out_) throw std::runtime_error(path_ + ": write failed");
}

}  // namespace ddp
