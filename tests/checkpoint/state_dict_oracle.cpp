// Test helpers for state-dict interop: the Python oracle, its dump format and bitwise / max-abs comparisons.
#include "tests/checkpoint/state_dict_oracle.h"

#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ddp::test {

std::string python_torch_missing() {
  static bool found = false;  // once found, not asked again; a miss is asked (and reported) by every test
  if (!found) found = python_has_modules("torch, torchvision");
  return found ? std::string() : python() + " does not have torch, torchvision";
}

CommandResult run_oracle(const std::string& args) {
  CommandResult r = run_command(shell_quote(python()) + " " +
                                shell_quote(source_dir() + "/tests/python/state_dict_oracle.py") + " " + args);
  EXPECT_EQ(r.exit_code, 0) << "state_dict_oracle.py " << args << "\n" << r.output;
  return r;
}

const at::Tensor& entry(const NamedTensors& state, const std::string& key) {
  for (const auto& [name, t] : state)
    if (name == key) return t;
  throw std::runtime_error("no entry " + key);
}

NamedTensors read_dump(const std::string& prefix) {
  // clang-format off
  static const std::map<std::string, at::ScalarType> dtypes = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf},   {"bfloat16", at::kBFloat16},
      {"int64", at::kLong},    {"int32", at::kInt},      {"int16", at::kShort},    {"int8", at::kChar},
      {"uint8", at::kByte},    {"bool", at::kBool},      {"complex64", at::kComplexFloat},
      {"complex128", at::kComplexDouble}};
  // clang-format on
  const std::string raw = read_file(prefix + ".bin");
  size_t offset = 0;
  NamedTensors out;
  for (const std::string& line : read_lines(prefix + ".txt")) {
    std::istringstream fields(line);
    std::string key, dtype, shape, nbytes;
    std::getline(fields, key, '\t');
    std::getline(fields, dtype, '\t');
    std::getline(fields, shape, '\t');
    std::getline(fields, nbytes, '\t');
    std::vector<int64_t> sizes;
    std::istringstream dims(shape);
    for (std::string d; std::getline(dims, d, ',');) sizes.push_back(std::stoll(d));
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(dtypes.at(dtype)));
    const size_t n = std::stoull(nbytes);
    if (n != t.nbytes() || offset + n > raw.size()) throw std::runtime_error(prefix + ": bad dump entry " + key);
    if (n) std::memcpy(t.data_ptr(), raw.data() + offset, n);
    offset += n;
    out.emplace_back(key, t);
  }
  if (offset != raw.size()) throw std::runtime_error(prefix + ".bin: trailing bytes");
  return out;
}

std::string bitwise_difference(const NamedTensors& expected, const NamedTensors& actual) {
  if (expected.size() != actual.size())
    return "expected " + std::to_string(expected.size()) + " entries, found " + std::to_string(actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [key, want] = expected[i];
    const auto& [got_key, got_raw] = actual[i];
    if (key != got_key) return "entry " + std::to_string(i) + ": expected key " + key + ", found " + got_key;
    at::Tensor got = got_raw.contiguous();
    if (got.scalar_type() != want.scalar_type())
      return key + ": dtype " + std::string(c10::toString(got.scalar_type())) + ", expected " +
             c10::toString(want.scalar_type());
    if (got.sizes() != want.sizes()) return key + ": shape differs";
    if (want.nbytes() && std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()) != 0)
      return key + ": values differ";
  }
  return "";
}

double max_abs_difference(const NamedTensors& expected, const NamedTensors& actual) {
  if (expected.size() != actual.size()) throw std::runtime_error("different numbers of entries");
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].first != actual[i].first) throw std::runtime_error("key mismatch at " + expected[i].first);
    if (expected[i].second.sizes() != actual[i].second.sizes())
      throw std::runtime_error("shape mismatch at " + expected[i].first);
    if (expected[i].second.is_complex()) continue;
    at::Tensor d = (expected[i].second.to(at::kDouble) - actual[i].second.to(at::kDouble)).abs();
    if (d.numel()) worst = std::max(worst, d.max().item<double>());
  }
  return worst;
}

}  // namespace ddp::test
