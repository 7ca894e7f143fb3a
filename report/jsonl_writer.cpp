// JsonlWriter: appends JSON lines, flushing each.
#include "report/jsonl_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ddp {

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
