// CheckpointStore: complete-only checkpoints (payload, line record, manifest with size + CRC32), retention on the line.
#include "checkpoint/checkpoint_store.h"

#include "base/direct_io.h"
#include "base/json_record.h"
#include "checkpoint/state_dict.h"

#include <isa-l/crc.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <regex>
#include <set>

namespace ddp {
namespace {

namespace fs = std::filesystem;

std::string ckpt_step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

// Manifests and latest.json are small; anything larger is not ours.
constexpr std::uintmax_t kCkptMaxRecordBytes = 1 << 20;

nlohmann::json ckpt_read_json(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot read: " + ec.message());
  if (size > kCkptMaxRecordBytes) throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, not a record");
  const std::vector<char> bytes = read_bytes(path);
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw std::runtime_error(path + ": not valid JSON");
  if (!j.is_object()) throw std::runtime_error(path + ": not a JSON object");
  return j;
}

int64_t ckpt_json_int(const nlohmann::json& j, const std::string& path, const char* key, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end()) throw std::runtime_error(path + ": no \"" + key + "\" field");
  if (!it->is_number_integer()) throw std::runtime_error(path + ": field \"" + key + "\" is not an integer");
  const bool negative = !it->is_number_unsigned();  // nlohmann keeps non-negative integers unsigned
  if (!negative && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw std::runtime_error(path + ": field \"" + key + "\" is outside [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
  const int64_t v = negative ? it->get<int64_t>() : static_cast<int64_t>(it->get<uint64_t>());
  if (v < lo || v > hi)
    throw std::runtime_error(path + ": field \"" + key + "\" is " + std::to_string(v) + ", outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

// "" when removed (or already gone), else why not.
std::string ckpt_remove_file(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  return ec ? path + ": cannot remove: " + ec.message() : "";
}

const std::regex& ckpt_payload_re() {
  static const std::regex re("step-([0-9]{1,18})\\.pt");
  return re;
}

// The CRC32 of zlib and zip (reflected IEEE polynomial) of `crc` continued over [data, data + size): ISA-L's, the
// same values as zlib's crc32 at several times its speed.
uint32_t crc32_of(uint32_t crc, const char* data, size_t size) {
  return crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(data), size);
}

}  // namespace

uint32_t crc32_of(const std::vector<char>& bytes) { return crc32_of(0, bytes.data(), bytes.size()); }

std::vector<char> read_bytes(const std::string& path) {
  std::error_code ec;
  // A device or pipe (/dev/zero, a FIFO) has no size to bound the read, and opening a FIFO waits for a writer.
  const auto status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_regular_file(status))
    throw std::runtime_error(path + ": not a regular file, so not a checkpoint");
  const auto size = fs::file_size(path, ec);
  std::vector<char> out;
  out.reserve(ec ? 0 : static_cast<size_t>(size));  // one allocation; a file that grows meanwhile still reads whole
  read_file_chunks(path, PageCache::Use, [&](const char* data, size_t n) { out.insert(out.end(), data, data + n); });
  return out;
}

uint32_t crc32_of_file(const std::string& path, PageCache cache) {
  uint32_t crc = 0;
  read_file_chunks(path, cache, [&](const char* data, size_t n) { crc = crc32_of(crc, data, n); });
  return crc;
}

std::vector<std::string> remove_temp_files(const std::string& dir, const std::string& name) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  const std::string prefix = name + ".tmp-";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) continue;
    if (file.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    std::error_code rec;
    if (entry.is_regular_file(rec) && fs::remove(entry.path(), rec)) removed.push_back(entry.path().string());
  }
  return removed;
}

CheckpointStore::CheckpointStore(std::string dir, int64_t keep_last, int64_t keep_best)
    : dir_(std::move(dir)), keep_last_(keep_last), keep_best_(keep_best) {}

std::string CheckpointStore::payload_path(int64_t step) const { return dir_ + "/" + ckpt_step_name(step) + ".pt"; }
std::string CheckpointStore::manifest_path(int64_t step) const { return dir_ + "/" + ckpt_step_name(step) + ".json"; }

std::optional<int64_t> CheckpointStore::step_of(const std::string& path) const {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::equivalent(p.parent_path().empty() ? fs::path(".") : p.parent_path(), dir_, ec) || ec) return std::nullopt;
  std::smatch m;
  const std::string name = p.filename().string();
  if (!std::regex_match(name, m, ckpt_payload_re())) return std::nullopt;
  return std::stoll(m[1]);
}

CheckpointInfo CheckpointStore::save(const std::vector<char>& payload, int64_t step, int64_t epoch,
                                     double eval_accuracy, const WarnFn& warn, Producer producer) {
  return save([&](const ByteSink& sink) { sink(payload.data(), payload.size()); }, step, epoch, eval_accuracy, warn,
              producer);
}

CheckpointInfo CheckpointStore::save(const std::function<void(const ByteSink&)>& produce, int64_t step, int64_t epoch,
                                     double eval_accuracy, const WarnFn& warn, Producer producer) {
  CheckpointInfo info;
  info.payload_path = payload_path(step);
  info.manifest_path = manifest_path(step);
  info.step = step;
  info.epoch = epoch;
  info.eval_accuracy = eval_accuracy;
  std::vector<int64_t> line = read_line(warn).value_or(std::vector<int64_t>{});
  line.erase(std::remove_if(line.begin(), line.end(), [&](int64_t s) { return s >= step; }), line.end());
  // Files of this step already there (an abandoned timeline, an unreadable checkpoint) are never overwritten.
  std::error_code ec;
  if (fs::exists(info.payload_path, ec) || fs::exists(info.manifest_path, ec)) move_aside(step, warn);
  uint32_t crc = 0;
  int64_t bytes = 0;
  write_file_atomic(
      info.payload_path,
      [&](const ByteSink& sink) {
        produce([&](const void* data, size_t size) {
          crc = crc32_of(crc, static_cast<const char*>(data), size);
          bytes += static_cast<int64_t>(size);
          sink(data, size);
        });
      },
      producer);
  info.bytes = bytes;
  info.crc32 = crc;
  // The line names the step before its manifest exists: a crash in between leaves a head without a manifest, which
  // resume skips (falling back along the line) and the start of the next run removes.
  line.insert(line.begin(), step);
  write_line(line);
  JsonRecord manifest;
  manifest.add("format_version", int64_t{1})
      .add("file", fs::path(info.payload_path).filename().string())
      .add("step", step)
      .add("epoch", epoch)
      .add("bytes", info.bytes)
      .add("crc32", static_cast<int64_t>(info.crc32))
      .add("eval_accuracy", eval_accuracy);
  const std::string text = manifest.str() + "\n";
  write_file_atomic(info.manifest_path, std::vector<char>(text.begin(), text.end()));
  const std::vector<int64_t> kept = apply_retention(line, warn);
  if (kept != line) write_line(kept);
  return info;
}

std::optional<CheckpointInfo> CheckpointStore::read_manifest(const std::string& manifest_path) {
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) return std::nullopt;
  const nlohmann::json j = ckpt_read_json(manifest_path);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CheckpointInfo info;
  auto file = j.find("file");
  if (file == j.end() || !file->is_string()) throw std::runtime_error(manifest_path + ": no \"file\" string field");
  const std::string name = file->get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw std::runtime_error(manifest_path + ": field \"file\" is not a file name in the folder");
  info.payload_path = (fs::path(manifest_path).parent_path() / name).string();
  info.manifest_path = manifest_path;
  info.step = ckpt_json_int(j, manifest_path, "step", 0, kMax);
  info.epoch = ckpt_json_int(j, manifest_path, "epoch", 0, kMax);
  info.bytes = ckpt_json_int(j, manifest_path, "bytes", 0, kMax);
  info.crc32 = static_cast<uint32_t>(ckpt_json_int(j, manifest_path, "crc32", 0, 0xffffffffll));
  auto acc = j.find("eval_accuracy");
  if (acc == j.end() || acc->is_null()) {
    info.eval_accuracy = -1;
  } else if (acc->is_number()) {
    info.eval_accuracy = acc->get<double>();
  } else {
    throw std::runtime_error(manifest_path + ": field \"eval_accuracy\" is not a number");
  }
  return info;
}

std::vector<CheckpointInfo> CheckpointStore::list(const WarnFn& warn) const {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  static const std::regex name_re("step-([0-9]{1,18})\\.json");
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, name_re)) continue;
    try {
      auto info = read_manifest(entry.path().string());
      if (!info) continue;
      if (info->step != std::stoll(m[1]) ||
          fs::path(info->payload_path).filename() != ckpt_step_name(info->step) + ".pt")
        throw std::runtime_error(entry.path().string() + ": its step and file do not match its name");
      out.push_back(*info);
    } catch (const std::exception& e) {
      if (warn) warn("unreadable checkpoint manifest " + std::string(e.what()) + " (left in place)");
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string CheckpointStore::verify(const CheckpointInfo& info, PageCache cache) {
  std::error_code ec;
  if (!fs::exists(info.payload_path, ec)) return info.payload_path + " is missing";
  const auto size = fs::file_size(info.payload_path, ec);
  if (ec || static_cast<int64_t>(size) != info.bytes)
    return info.payload_path + " has " + std::to_string(size) + " bytes, manifest says " + std::to_string(info.bytes);
  try {
    if (crc32_of_file(info.payload_path, cache) != info.crc32) return info.payload_path + " fails its CRC32 check";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string CheckpointStore::missing_from_line(int64_t step) const {
  return "skipping checkpoint step " + std::to_string(step) + " of the line in " + dir_ +
         "/latest.json: " + manifest_path(step) + " is missing (a crash while it was written?)";
}

CheckpointStore::Candidates CheckpointStore::resume_candidates(const WarnFn& warn) const {
  Candidates out;
  std::vector<CheckpointInfo> found;
  if (auto line = read_line(warn)) {
    for (int64_t step : *line) {
      try {
        auto info = read_manifest(manifest_path(step));
        if (!info) {
          out.missing.push_back(step);
          continue;
        }
        found.push_back(*info);
      } catch (const std::exception& e) {
        warn("skipping unreadable checkpoint manifest " + std::string(e.what()) + " (left in place)");
      }
    }
  } else {
    found = list(warn);
  }
  for (const auto& info : found) {
    const std::string problem = verify(info);
    if (problem.empty())
      out.usable.push_back(info);
    else
      warn("skipping corrupt checkpoint: " + problem + " (left in place)");
  }
  return out;
}

std::optional<std::vector<int64_t>> CheckpointStore::read_line(const WarnFn& warn) const {
  const std::string path = dir_ + "/latest.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    const nlohmann::json j = ckpt_read_json(path);
    auto line = j.find("line");
    if (line == j.end() || !line->is_array()) throw std::runtime_error(path + ": no \"line\" array");
    std::vector<int64_t> steps;
    for (const auto& s : *line) {
      if (!s.is_number_unsigned() || s.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw std::runtime_error(path + ": \"line\" holds something other than a step number");
      const auto step = static_cast<int64_t>(s.get<uint64_t>());
      if (!steps.empty() && step >= steps.back())
        throw std::runtime_error(path + ": \"line\" is not in decreasing step order");
      steps.push_back(step);
    }
    return steps;
  } catch (const std::exception& e) {
    if (warn) warn(std::string(e.what()) + "; following every complete checkpoint in " + dir_ + " instead");
    return std::nullopt;
  }
}

void CheckpointStore::write_line(const std::vector<int64_t>& steps) const {
  std::string text = "{\"format_version\":1,\"line\":[";
  for (size_t i = 0; i < steps.size(); ++i) text += (i ? "," : "") + std::to_string(steps[i]);
  text += "]}\n";
  write_file_atomic(dir_ + "/latest.json", std::vector<char>(text.begin(), text.end()));
}

std::vector<std::string> CheckpointStore::remove_debris(const std::string& keep) const {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return removed;
  // A payload without its manifest is debris only where the line names its step (save writes the line before the
  // manifest); any other (a file put here by hand, a checkpoint written by Python) is the user's.
  const std::vector<int64_t> line = read_line().value_or(std::vector<int64_t>{});
  static const std::regex tmp_re("(step-[0-9]{1,18}\\.(pt|json)|latest\\.json)\\.tmp-[0-9]+");
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    std::error_code rec;
    if (!entry.is_regular_file(rec)) continue;
    const bool temp = std::regex_match(name, tmp_re);
    const bool orphan = std::regex_match(name, m, ckpt_payload_re()) &&
                        std::find(line.begin(), line.end(), std::stoll(m[1])) != line.end() &&
                        !fs::exists(manifest_path(std::stoll(m[1])), rec) && !rec &&
                        !(!keep.empty() && fs::equivalent(entry.path(), keep, rec));
    if ((temp || orphan) && fs::remove(entry.path(), rec)) removed.push_back(entry.path().string());
  }
  return removed;
}

void CheckpointStore::move_aside(int64_t step, const WarnFn& warn) const {
  const std::string name = ckpt_step_name(step);
  std::error_code ec;
  for (int k = 1;; ++k) {
    const std::string aside = dir_ + "/displaced-" + std::to_string(k) + "-" + name;
    if (fs::exists(aside + ".pt", ec) || fs::exists(aside + ".json", ec)) continue;
    // Payload first: a crash in between leaves a manifest without payload (skipped), never an orphan payload.
    for (const char* ext : {".pt", ".json"}) {
      if (!fs::exists(dir_ + "/" + name + ext, ec)) continue;
      fs::rename(dir_ + "/" + name + ext, aside + ext, ec);
      if (ec) throw std::runtime_error(dir_ + "/" + name + ext + ": cannot move aside: " + ec.message());
    }
    if (warn)
      warn(dir_ + "/" + name + " is not this run's checkpoint of step " + std::to_string(step) +
           " (another timeline, or unreadable): moved aside to " + aside + ".{pt,json}");
    return;
  }
}

std::vector<int64_t> CheckpointStore::apply_retention(const std::vector<int64_t>& line, const WarnFn& warn) {
  // line[0] was just written; the rest is older. Good = readable manifest and a payload of the stated size.
  std::vector<CheckpointInfo> good;
  for (size_t i = 0; i < line.size(); ++i) {
    std::optional<CheckpointInfo> info;
    try {
      info = read_manifest(manifest_path(line[i]));
    } catch (const std::exception& e) {
      if (warn) warn("unreadable checkpoint manifest " + std::string(e.what()) + " (left in place, off the line)");
      continue;
    }
    std::error_code ec;
    if (!info || fs::file_size(info->payload_path, ec) != static_cast<std::uintmax_t>(info->bytes) || ec) {
      if (info && warn) warn("checkpoint " + info->payload_path + " is incomplete (left in place, off the line)");
      continue;
    }
    good.push_back(*info);
  }
  std::set<int64_t> keep;
  for (size_t i = 0; i < good.size() && static_cast<int64_t>(i) < keep_last_; ++i) keep.insert(good[i].step);
  if (keep_best_ > 0) {
    std::vector<CheckpointInfo> evaluated;
    for (const auto& c : good)
      if (c.eval_accuracy >= 0) evaluated.push_back(c);
    std::stable_sort(evaluated.begin(), evaluated.end(),
                     [](const auto& a, const auto& b) { return a.eval_accuracy > b.eval_accuracy; });
    for (size_t i = 0; i < evaluated.size() && static_cast<int64_t>(i) < keep_best_; ++i)
      keep.insert(evaluated[i].step);
  }
  std::vector<int64_t> kept;
  for (const auto& c : good) {
    if (keep.count(c.step)) {
      kept.push_back(c.step);
      continue;
    }
    // Never delete what cannot be read: a checkpoint failing its CRC stays (a warning says so). Read from the disk,
    // past the page cache: nothing reads it again.
    const std::string problem = verify(c, PageCache::Bypass);
    if (!problem.empty()) {
      if (warn) warn("corrupt checkpoint " + problem + " (left in place, off the line)");
      continue;
    }
    // Manifest first (incomplete, then gone); one that cannot be removed stays on the line, retried next time.
    std::string failed = ckpt_remove_file(c.manifest_path);
    if (failed.empty()) failed = ckpt_remove_file(c.payload_path);
    if (failed.empty()) continue;
    if (warn) warn("retention: " + failed);
    kept.push_back(c.step);
  }
  return kept;
}

}  // namespace ddp
