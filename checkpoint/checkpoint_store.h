// CheckpointStore: the checkpoints/ folder: atomic payload + manifest (size, CRC32), the run's line, retention.
#pragma once

#include "base/atomic_file.h"
#include "base/direct_io.h"

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

using WarnFn = std::function<void(const std::string&)>;

// The run's line of checkpoints is recorded in DIR/latest.json ({"format_version": 1, "line": [22, 20, 16]}, steps
// newest first), rewritten atomically. resume = auto follows it (falling back along it); retention deletes only
// checkpoints of the line older than its newest, and never one it cannot read; files not on the line are never
// deleted or overwritten (a save whose name is taken moves the old files aside as displaced-N-step-...).
class CheckpointStore {
 public:
  CheckpointStore(std::string dir, int64_t keep_last, int64_t keep_best);

  // Writes the payload atomically (temp name, fsync, rename, fsync dir), records it at the head of the line, writes
  // its manifest the same way, then applies retention to the line. Earlier checkpoints are untouched if anything
  // fails (the error is thrown); `warn` hears about files moved aside or left in place.
  // `producer`: where the payload's bytes are copied in and counted (write_file_atomic); every file's system calls
  // and the retention run on the calling thread.
  CheckpointInfo save(const std::vector<char>& payload, int64_t step, int64_t epoch, double eval_accuracy,
                      const WarnFn& warn = {}, Producer producer = Producer::ThisThread);
  // The same, the payload written to its temp file as `produce` makes it (never whole in memory), its size and CRC32
  // counted on the way; an exception from `produce` leaves no payload behind and the line as it was.
  CheckpointInfo save(const std::function<void(const ByteSink&)>& produce, int64_t step, int64_t epoch,
                      double eval_accuracy, const WarnFn& warn = {}, Producer producer = Producer::ThisThread);
  // Complete checkpoints in the folder (manifest present and readable), newest step first; `warn` hears about each
  // manifest that exists but cannot be read.
  std::vector<CheckpointInfo> list(const WarnFn& warn = {}) const;
  // What resume = auto tries, newest first (`usable`): the line's checkpoints when latest.json exists, else (a folder
  // from ddptrain 0.3.0 or before, or an unreadable latest.json) every complete one. Entries with an unreadable
  // manifest or whose payload fails its size/CRC check are reported through `warn` and left out; steps of the line
  // without a manifest (`missing`, newest first) are left to the caller to say (missing_from_line).
  struct Candidates {
    std::vector<CheckpointInfo> usable;
    std::vector<int64_t> missing;
  };
  Candidates resume_candidates(const WarnFn& warn) const;
  // The warning for a step of the line whose manifest is missing.
  std::string missing_from_line(int64_t step) const;
  // The line latest.json records; nullopt when there is none (or it cannot be read: `warn` hears why).
  std::optional<std::vector<int64_t>> read_line(const WarnFn& warn = {}) const;
  // Records `steps` (newest first) as the line, atomically.
  void write_line(const std::vector<int64_t>& steps) const;
  // Removes what a crash mid-write leaves, our own names only: *.tmp-PID of checkpoint files and latest.json, and
  // payloads step-N.pt without their manifest whose step the line names, never the file `keep` (the one a resume
  // names). Returns the removed paths.
  std::vector<std::string> remove_debris(const std::string& keep = "") const;
  // "" when the payload matches the manifest, else what is wrong.
  static std::string verify(const CheckpointInfo& info, PageCache cache = PageCache::Use);
  // Reads a manifest (any valid JSON layout); nullopt if absent; throws naming the file when it cannot be read.
  static std::optional<CheckpointInfo> read_manifest(const std::string& manifest_path);
  // The step of DIR/step-N.pt, or nullopt when `path` is not a checkpoint payload of this folder.
  std::optional<int64_t> step_of(const std::string& path) const;
  std::string payload_path(int64_t step) const;
  std::string manifest_path(int64_t step) const;
  const std::string& dir() const { return dir_; }

 private:
  // Returns the line after retention (the kept entries, newest first).
  std::vector<int64_t> apply_retention(const std::vector<int64_t>& line, const WarnFn& warn);
  void move_aside(int64_t step, const WarnFn& warn) const;

  std::string dir_;
  int64_t keep_last_;
  int64_t keep_best_;
};

uint32_t crc32_of(const std::vector<char>& bytes);
// The file's CRC32, read a few MiB at a time (never whole in memory); std::runtime_error naming it when unreadable.
uint32_t crc32_of_file(const std::string& path, PageCache cache = PageCache::Use);
std::vector<char> read_bytes(const std::string& path);
// Removes DIR/NAME.tmp-PID files (an atomic write of NAME cut short); returns the removed paths.
std::vector<std::string> remove_temp_files(const std::string& dir, const std::string& name);

}  // namespace ddp
