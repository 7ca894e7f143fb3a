// CheckpointStore: the checkpoints/ folder: atomic payload + manifest (size, CRC32), listing, validation, retention.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

struct CheckpointInfo {
  std::string payload_path;   // DIR/step-00000123.pt (torch.load-readable dict)
  std::string manifest_path;  // DIR/step-00000123.json: the completion marker
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  double eval_accuracy = -1;  // < 0: no evaluation at this checkpoint
};

class CheckpointStore {
 public:
  CheckpointStore(std::string dir, int64_t keep_last, int64_t keep_best);

  // Writes the payload atomically (temp name, fsync, rename, fsync dir), then its manifest the same way,
  // then applies retention. Earlier checkpoints are untouched if anything fails (the error is thrown).
  CheckpointInfo save(const std::vector<char>& payload, int64_t step, int64_t epoch, double eval_accuracy);
  // Complete checkpoints (manifest present and parseable), newest step first.
  std::vector<CheckpointInfo> list() const;
  // Newest checkpoint whose payload matches its manifest's size and CRC32; `warn` hears about each bad one.
  std::optional<CheckpointInfo> newest_valid(const std::function<void(const std::string&)>& warn) const;
  // "" when the payload matches the manifest, else what is wrong.
  static std::string verify(const CheckpointInfo& info);
  // Reads a manifest; nullopt if absent or malformed.
  static std::optional<CheckpointInfo> read_manifest(const std::string& manifest_path);
  const std::string& dir() const { return dir_; }

 private:
  void apply_retention();

  std::string dir_;
  int64_t keep_last_;
  int64_t keep_best_;
};

uint32_t crc32_of(const std::vector<char>& bytes);
std::vector<char> read_bytes(const std::string& path);

}  // namespace ddp
