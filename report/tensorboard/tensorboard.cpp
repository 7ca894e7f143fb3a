// TensorBoard event-file writer: hand-encoded Event protos in CRC32C-checked TFRecord framing.
#include "report/tensorboard/tensorboard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

namespace ddp {
namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

void append_little_endian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Protobuf wire format: key = field_number << 3 | wire_type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void append_key(std::string& out, int field, int wire_type) { append_varint(out, (uint64_t(field) << 3) | wire_type); }
void append_double_field(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  append_key(out, field, 1);
  append_little_endian(out, bits, 8);
}
void append_float_field(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  append_key(out, field, 5);
  append_little_endian(out, bits, 4);
}
void append_int64_field(std::string& out, int field, int64_t v) {
  append_key(out, field, 0);
  append_varint(out, static_cast<uint64_t>(v));  // negative int64: 10-byte two's complement varint
}
void append_bytes_field(std::string& out, int field, const std::string& bytes) {
  append_key(out, field, 2);
  append_varint(out, bytes.size());
  out += bytes;
}

// proto3 leaves scalar fields at their default (0, +0.0, "") out; a oneof member is always written.
void append_event_header(std::string& out, double wall_time, int64_t step) {
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof bits);
  if (bits != 0) append_double_field(out, 1, wall_time);  // Event.wall_time
  if (step != 0) append_int64_field(out, 2, step);        // Event.step
}

// An Event (wall_time, step) whose one payload field is `field` = `payload` (a string or a message).
std::string event_with(double wall_time, int64_t step, int field, const std::string& payload) {
  std::string event;
  append_event_header(event, wall_time, step);
  append_bytes_field(event, field, payload);
  return event;
}

// IEEE round-to-nearest double -> float, written out for finite values beyond float range (a plain cast
// of those is undefined behaviour in C++): below FLT_MAX + half an ulp -> FLT_MAX, from there on -> inf.
float to_float32(double v) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (std::isfinite(v) && std::fabs(v) > kMax) {
    float r = std::fabs(v) < double(kMax) + std::ldexp(1.0, 103) ? kMax : std::numeric_limits<float>::infinity();
    return v < 0 ? -r : r;
  }
  return static_cast<float>(v);
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::atomic<int64_t> writers_opened{0};

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(const std::string& data) {
  std::string length;
  append_little_endian(length, data.size(), 8);
  std::string out = length;
  append_little_endian(out, masked_crc32c(length.data(), length.size()), 4);
  out += data;
  append_little_endian(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string encode_file_version_event(double wall_time, int64_t step) {
  return event_with(wall_time, step, 3, "brain.Event:2");  // Event.file_version
}

std::string encode_session_start_event(int64_t step, double wall_time) {
  constexpr int64_t kSessionLogStart = 1;  // SessionLog.SessionStatus.START
  std::string session_log;
  append_int64_field(session_log, 1, kSessionLogStart);  // SessionLog.status
  return event_with(wall_time, step, 7, session_log);    // Event.session_log
}

std::string encode_scalar_event(const std::string& tag, double value, int64_t step, double wall_time) {
  std::string summary_value;
  if (!tag.empty()) append_bytes_field(summary_value, 1, tag);  // Summary.Value.tag
  append_float_field(summary_value, 2, to_float32(value));      // Summary.Value.simple_value
  std::string summary;
  append_bytes_field(summary, 1, summary_value);   // Summary.value
  return event_with(wall_time, step, 5, summary);  // Event.summary
}

double wall_time_now() {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
  return static_cast<double>(us.count()) / 1e6;
}

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw std::runtime_error("tensorboard: cannot create " + log_dir + ": " + ec.message());
  double now = wall_time_now();
  char name[512];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%lld.%lld", static_cast<long long>(now),
                hostname().c_str(), static_cast<long long>(getpid()), static_cast<long long>(writers_opened++));
  path_ = (std::filesystem::path(log_dir) / name).string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw std::runtime_error("tensorboard: cannot open " + path_);
  write_record(encode_file_version_event(now));
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalar(tag, value, step, wall_time_now());
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  write_record(encode_scalar_event(tag, value, step, wall_time));
}

void TensorBoardWriter::purge_from(int64_t step) {
  write_record(encode_file_version_event(wall_time_now(), step));
  write_record(encode_session_start_event(step, wall_time_now()));
}

void TensorBoardWriter::flush() {
  out_.flush();
  if (!out_) throw std::runtime_error("tensorboard: cannot write " + path_);
}

void TensorBoardWriter::write_record(const std::string& event) {
  out_ << tfrecord_frame(event);
  flush();
}

}  // namespace ddp
