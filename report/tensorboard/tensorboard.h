// TensorBoard event files: CRC32C, TFRecord framing and a scalar-summary writer (no protobuf dependency).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace ddp {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(const std::string& bytes) { return crc32c(bytes.data(), bytes.size()); }
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
// One TFRecord: uint64 length (little-endian), masked CRC of the length, data, masked CRC of the data.
std::string tfrecord_frame(const std::string& data);

// Serialized tensorflow.Event protos (field order and proto3 defaults as protobuf's own serializer).
std::string encode_file_version_event(double wall_time, int64_t step = 0);  // file_version "brain.Event:2"
// Event{wall_time, step, session_log{status: START}}: TensorBoard drops every earlier event at `step` or later.
std::string encode_session_start_event(int64_t step, double wall_time);
// summary { value { tag, simple_value } }; value is stored as float32 (finite values beyond float range -> +-inf).
std::string encode_scalar_event(const std::string& tag, double value, int64_t step, double wall_time);

// Seconds since the Unix epoch, microsecond resolution (Event.wall_time).
double wall_time_now();

// Writes scalars to log_dir/events.out.tfevents.<10-digit unix time>.<hostname>.<pid>.<n> (the name
// torch.utils.tensorboard.SummaryWriter gives its files; n counts writers opened by this process).
// The first record is Event{wall_time, file_version "brain.Event:2"}; each add_scalar appends one
// Event{wall_time, step, summary{value{tag, simple_value}}} and flushes it to the file.
// Throws std::runtime_error when the directory or file cannot be created or a write fails. Not thread-safe.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::string& log_dir);
  void add_scalar(const std::string& tag, double value, int64_t step);  // wall_time = now
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time);
  // What SummaryWriter(purge_step=step) writes when it opens its file: Event{step, file_version "brain.Event:2"}
  // then Event{step, session_log START}, so that TensorBoard hides the points an interrupted run logged at
  // `step` or later (a resumed run calls it with its first step to come).
  void purge_from(int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace ddp
