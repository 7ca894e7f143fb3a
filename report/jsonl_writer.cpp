// JsonlWriter: appends JSON lines, flushing each; drop_records_after: a resumed run's file cut at its checkpoint.
#include "report/jsonl_writer.h"

#include "base/atomic_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

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

void drop_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<char> kept;
  kept.reserve(text.size());
  bool dropped = false;
  for (size_t at = 0; at < text.size();) {
    const size_t eol = text.find('\n', at);
    if (eol == std::string::npos) {  // a line the interrupted run never finished
      dropped = true;
      break;
    }
    const size_t key = text.find("\"step\":", at);
    const bool past = key < eol && std::strtoll(text.c_str() + key + 7, nullptr, 10) > step;
    if (past)
      dropped = true;
    else
      kept.insert(kept.end(), text.begin() + static_cast<std::ptrdiff_t>(at),
                  text.begin() + static_cast<std::ptrdiff_t>(eol + 1));
    at = eol + 1;
  }
  if (dropped) write_file_atomic(path, kept);
}

}  // namespace ddp
