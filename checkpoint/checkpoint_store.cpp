// CheckpointStore: complete-only checkpoints (payload, then manifest with size + CRC32) and keep_last/keep_best.
#include "checkpoint/checkpoint_store.h"

#include "app/metrics.h"
#include "checkpoint/state_dict.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

namespace ddp {
namespace {

namespace fs = std::filesystem;

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::optional<std::string> json_field(const std::string& text, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":(\"[^\"]*\"|[-0-9.eE+a-z]+)");
  if (!std::regex_search(text, m, re)) return std::nullopt;
  std::string v = m[1];
  if (!v.empty() && v.front() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

}  // namespace

uint32_t crc32_of(const std::vector<char>& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

CheckpointStore::CheckpointStore(std::string dir, int64_t keep_last, int64_t keep_best)
    : dir_(std::move(dir)), keep_last_(keep_last), keep_best_(keep_best) {}

CheckpointInfo CheckpointStore::save(const std::vector<char>& payload, int64_t step, int64_t epoch,
                                     double eval_accuracy) {
  CheckpointInfo info;
  info.payload_path = dir_ + "/" + step_name(step) + ".pt";
  info.manifest_path = dir_ + "/" + step_name(step) + ".json";
  info.step = step;
  info.epoch = epoch;
  info.bytes = static_cast<int64_t>(payload.size());
  info.crc32 = crc32_of(payload);
  info.eval_accuracy = eval_accuracy;
  // A re-save of the same step first drops the old marker, so a crash in between leaves no stale manifest.
  std::error_code ec;
  fs::remove(info.manifest_path, ec);
  write_file_atomic(info.payload_path, payload);
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
  apply_retention();
  return info;
}

std::optional<CheckpointInfo> CheckpointStore::read_manifest(const std::string& manifest_path) {
  std::ifstream in(manifest_path);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto file = json_field(text, "file"), step = json_field(text, "step"), bytes = json_field(text, "bytes"),
       crc = json_field(text, "crc32"), epoch = json_field(text, "epoch"), acc = json_field(text, "eval_accuracy");
  if (!file || !step || !bytes || !crc || !epoch) return std::nullopt;
  CheckpointInfo info;
  try {
    info.payload_path = (fs::path(manifest_path).parent_path() / *file).string();
    info.manifest_path = manifest_path;
    info.step = std::stoll(*step);
    info.epoch = std::stoll(*epoch);
    info.bytes = std::stoll(*bytes);
    info.crc32 = static_cast<uint32_t>(std::stoull(*crc));
    info.eval_accuracy = (acc && *acc != "null") ? std::stod(*acc) : -1;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return info;
}

std::vector<CheckpointInfo> CheckpointStore::list() const {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  static const std::regex name_re("step-[0-9]+\\.json");
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, name_re)) continue;
    if (auto info = read_manifest(entry.path().string())) out.push_back(*info);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string CheckpointStore::verify(const CheckpointInfo& info) {
  std::error_code ec;
  if (!fs::exists(info.payload_path, ec)) return info.payload_path + " is missing";
  const auto size = fs::file_size(info.payload_path, ec);
  if (ec || static_cast<int64_t>(size) != info.bytes)
    return info.payload_path + " has " + std::to_string(size) + " bytes, manifest says " + std::to_string(info.bytes);
  if (crc32_of(read_bytes(info.payload_path)) != info.crc32) return info.payload_path + " fails its CRC32 check";
  return "";
}

std::optional<CheckpointInfo> CheckpointStore::newest_valid(
    const std::function<void(const std::string&)>& warn) const {
  for (const auto& info : list()) {
    const std::string problem = verify(info);
    if (problem.empty()) return info;
    if (warn) warn("skipping corrupt checkpoint: " + problem);
  }
  return std::nullopt;
}

void CheckpointStore::apply_retention() {
  auto all = list();  // newest first
  std::set<int64_t> keep;
  for (size_t i = 0; i < all.size() && static_cast<int64_t>(i) < keep_last_; ++i) keep.insert(all[i].step);
  if (keep_best_ > 0) {
    std::vector<CheckpointInfo> evaluated;
    for (const auto& c : all)
      if (c.eval_accuracy >= 0) evaluated.push_back(c);
    std::stable_sort(evaluated.begin(), evaluated.end(),
                     [](const auto& a, const auto& b) { return a.eval_accuracy > b.eval_accuracy; });
    for (size_t i = 0; i < evaluated.size() && static_cast<int64_t>(i) < keep_best_; ++i)
      keep.insert(evaluated[i].step);
  }
  for (const auto& c : all) {
    if (keep.count(c.step)) continue;
    std::error_code ec;
    fs::remove(c.manifest_path, ec);  // incomplete first, then gone
    fs::remove(c.payload_path, ec);
  }
}

}  // namespace ddp
