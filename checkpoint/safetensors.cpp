// safetensors reading (every header field checked first) and writing.
#include "checkpoint/safetensors.h"

#include "base/atomic_file.h"
#include "base/json_record.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ddp {
namespace {

namespace fs = std::filesystem;

// The format's dtype names that ATen holds (safetensors/torch.py's table).
struct Dtype {
  const char* name;
  at::ScalarType type;
};
constexpr std::array<Dtype, 15> kDtypes{{{"F64", at::kDouble},
                                         {"F32", at::kFloat},
                                         {"F16", at::kHalf},
                                         {"BF16", at::kBFloat16},
                                         {"I64", at::kLong},
                                         {"I32", at::kInt},
                                         {"I16", at::kShort},
                                         {"I8", at::kChar},
                                         {"U8", at::kByte},
                                         {"BOOL", at::kBool},
                                         {"F8_E4M3", at::kFloat8_e4m3fn},
                                         {"F8_E5M2", at::kFloat8_e5m2},
                                         {"U16", at::kUInt16},
                                         {"U32", at::kUInt32},
                                         {"U64", at::kUInt64}}};

constexpr size_t kMaxDims = 64;

const char* dtype_name(at::ScalarType type) {
  for (const Dtype& d : kDtypes)
    if (d.type == type) return d.name;
  throw std::runtime_error(std::string("safetensors has no dtype for ") + c10::toString(type));
}

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": not a valid safetensors file: " + what);
}

// Before the JSON is parsed: nesting no deeper than the format's (header, tensor, shape) and no array longer than
// kMaxDims, so a hostile header cannot make the parser build more than a few values per byte.
void check_header_nesting(const std::string& header, const std::string& path) {
  std::vector<size_t> open;  // per open bracket: elements seen so far (arrays), or SIZE_MAX (objects)
  bool in_string = false, escaped = false;
  for (const char c : header) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (open.size() == 3) fail(path, "the header nests deeper than the format's name -> tensor -> shape");
      open.push_back(c == '[' ? 1 : SIZE_MAX);
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() != SIZE_MAX && ++open.back() > kMaxDims) {
      fail(path, "an array of the header holds more than " + std::to_string(kMaxDims) + " entries");
    }
  }
}

uint64_t checked_offset(const nlohmann::json& v, const std::string& path, const std::string& name) {
  if (!v.is_number_unsigned()) fail(path, "\"" + name + "\": data_offsets must be two non-negative integers");
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const nlohmann::json& info, const std::string& path) {
  if (name.empty()) fail(path, "a tensor with an empty name");
  if (!info.is_object()) fail(path, "\"" + name + "\" is not an object of dtype, shape and data_offsets");
  const auto dtype = info.find("dtype"), shape = info.find("shape"), offsets = info.find("data_offsets");
  if (dtype == info.end() || !dtype->is_string() || shape == info.end() || !shape->is_array() ||
      offsets == info.end() || !offsets->is_array() || offsets->size() != 2 || info.size() != 3)
    fail(path, "\"" + name + "\" must hold exactly dtype (a string), shape (an array) and data_offsets ([begin, end])");
  Entry e{name, at::kFloat, {}, 0, 0};
  const auto known =
      std::find_if(kDtypes.begin(), kDtypes.end(), [&](const Dtype& d) { return dtype->get<std::string>() == d.name; });
  if (known == kDtypes.end()) fail(path, "\"" + name + "\": unknown dtype \"" + dtype->get<std::string>() + "\"");
  e.type = known->type;
  if (shape->size() > kMaxDims) fail(path, "\"" + name + "\": more than " + std::to_string(kMaxDims) + " dimensions");
  uint64_t bytes = c10::elementSize(e.type), elements = 1;  // elements: of the shape with no side 0, as ATen's strides
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(path, "\"" + name + "\": shape entries must be non-negative integers");
    if (__builtin_mul_overflow(bytes, d.get<uint64_t>(), &bytes) ||
        __builtin_mul_overflow(elements, std::max<uint64_t>(d.get<uint64_t>(), 1), &elements) ||
        elements > static_cast<uint64_t>(INT64_MAX))
      fail(path, "\"" + name + "\": its shape's byte count overflows 64 bits");
    e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  e.begin = checked_offset((*offsets)[0], path, name);
  e.end = checked_offset((*offsets)[1], path, name);
  if (e.end < e.begin) fail(path, "\"" + name + "\": data_offsets end before they begin");
  if (e.end - e.begin != bytes)
    fail(path, "\"" + name + "\": data_offsets span " + std::to_string(e.end - e.begin) + " bytes, its dtype and " +
                   "shape need " + std::to_string(bytes));
  return e;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  return read_safetensors(in, file_size, path);
}

SafetensorsFile read_safetensors(std::istream& in, uint64_t file_size, const std::string& path) {
  if (file_size < 8) fail(path, std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | length_bytes[i];  // little-endian
  if (header_size > kMaxSafetensorsHeaderBytes)
    fail(path, "its header claims " + std::to_string(header_size) + " bytes, over the limit of " +
                   std::to_string(kMaxSafetensorsHeaderBytes));
  if (header_size > file_size - 8)
    fail(path, "its header claims " + std::to_string(header_size) + " bytes, the file holds " +
                   std::to_string(file_size - 8) + " after the length (truncated?)");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  if (!in) fail(path, "the header could not be read in full");
  if (header.empty() || header.front() != '{') fail(path, "the header is not a JSON object");
  check_header_nesting(header, path);

  std::set<std::string> names;
  bool duplicate = false;
  const nlohmann::json j = nlohmann::json::parse(
      header,
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
            !names.insert(parsed.get<std::string>()).second)
          duplicate = true;
        return true;
      },
      /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(path, "the header is not valid JSON");
  if (duplicate) fail(path, "the header names a tensor twice");

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, "__metadata__ is not an object of strings");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) fail(path, "__metadata__ \"" + key + "\" is not a string");
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, info, path));
  }
  // The tensors' bytes tile the data: in offset order, each beginning where the previous one ended, the last
  // ending at the file's end (safetensors' Metadata::validate).
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  const uint64_t data_size = file_size - 8 - header_size;
  uint64_t next = 0;
  for (const Entry& e : entries) {
    if (e.begin != next)
      fail(path, "\"" + e.name + "\" begins at byte " + std::to_string(e.begin) + " of the data, where " +
                     std::to_string(next) + " was next (" + (e.begin < next ? "overlapping" : "a gap") + ")");
    if (e.end > data_size)
      fail(path, "\"" + e.name + "\" ends at byte " + std::to_string(e.end) + ", past the data's " +
                     std::to_string(data_size) + " (truncated?)");
    next = e.end;
  }
  if (next != data_size)
    fail(path, std::to_string(data_size - next) + " bytes after the last tensor: the file is larger than its " +
                   "header says");
  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) throw std::runtime_error(path + ": reading \"" + e.name + "\" failed");
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  AtomicFileSet file;
  write_safetensors(file, path, tensors, metadata);
  file.commit();
}

void write_safetensors(AtomicFileSet& files, const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> data;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + json_quote(key) + ":" + json_quote(value);
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    header += (header.back() == '{' ? "" : ",") + json_quote(name) + ":{\"dtype\":\"" + dtype_name(t.scalar_type()) +
              "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) header += (d ? "," : "") + std::to_string(t.size(d));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
    data.push_back(std::move(t));
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  files.write(path, [&](const ByteSink& sink) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
    sink(length, 8);
    sink(header.data(), header.size());
    for (const at::Tensor& t : data) sink(t.data_ptr(), t.nbytes());
  });
}

bool is_safetensors_file(const std::string& path) {
  const std::string ext = ".safetensors";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) return true;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // opening a FIFO to look would wait for its writer
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  in.read(head, 9);
  return in.gcount() == 9 && head[8] == '{';
}

}  // namespace ddp
