// Tests: unreadable state-dict files (missing, empty, corrupt, truncated, not a dict) give errors naming the file.
#include "checkpoint/state_dict.h"
#include "tests/checkpoint/state_dict_oracle.h"

#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace ddp::test {
namespace {

const char* kPlainDictHint = "torch.save(dict(model.state_dict()), ";

// The message load_state_dict_file(path) throws (fails the test when it does not throw).
std::string load_error(const std::string& path) {
  try {
    load_state_dict_file(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " loaded without error";
  return "";
}

void expect_mentions(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
}

std::string write_bytes(const TempDir& dir, const std::string& name, const std::vector<char>& bytes) {
  write_file(dir / name, std::string(bytes.begin(), bytes.end()));
  return dir / name;
}

std::vector<char> valid_file_bytes() {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", torch::arange(1000, torch::kFloat32));
  dict.insert("b", torch::ones({3}));
  return torch::pickle_save(dict);
}

TEST(StateDictErrors, MissingFile) {
  TempDir dir;
  expect_mentions(load_error(dir / "nope.pt"), {dir / "nope.pt", "no such file"});
}

TEST(StateDictErrors, EmptyFile) {
  TempDir dir;
  expect_mentions(load_error(write_bytes(dir, "empty.pt", {})), {dir / "empty.pt", "empty", kPlainDictHint});
}

TEST(StateDictErrors, NotAZipArchive) {
  TempDir dir;
  std::string text = "this is not a checkpoint\n";
  std::string path = write_bytes(dir, "text.pt", std::vector<char>(text.begin(), text.end()));
  expect_mentions(load_error(path), {path, "not a zip archive", kPlainDictHint});
}

TEST(StateDictErrors, TruncatedFiles) {
  TempDir dir;
  std::vector<char> bytes = valid_file_bytes();
  for (size_t keep : {bytes.size() / 2, bytes.size() - 10, size_t{30}}) {
    std::string path = write_bytes(dir, "cut" + std::to_string(keep) + ".pt",
                                   std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep)));
    expect_mentions(load_error(path), {path, "corrupt or truncated", kPlainDictHint});
  }
}

TEST(StateDictErrors, CorruptedPickle) {
  TempDir dir;
  std::vector<char> bytes = valid_file_bytes();
  // The first opcode after PROTO 2 in data.pkl becomes 0xff. Its local zip header comes first: 30 fixed bytes
  // (extra-field length at 28), the name, the extra field, then the record.
  const std::string name = "archive/data.pkl";
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  const auto header = at - 30;
  const size_t extra = static_cast<uint8_t>(header[28]) | static_cast<size_t>(static_cast<uint8_t>(header[29])) << 8;
  const auto record = at + static_cast<std::ptrdiff_t>(name.size() + extra);
  ASSERT_EQ(std::string(record, record + 2), std::string("\x80\x02", 2));
  record[2] = static_cast<char>(0xff);
  std::string path = write_bytes(dir, "garbled.pt", bytes);
  expect_mentions(load_error(path), {path, "unsupported pickle opcode 0xff", kPlainDictHint});
}

TEST(StateDictErrors, NonDictValues) {
  TempDir dir;
  c10::impl::GenericList list(c10::TensorType::get());
  list.push_back(torch::ones({2}));
  c10::impl::GenericDict nested(c10::StringType::get(), c10::AnyType::get());
  nested.insert("model", c10::impl::GenericDict(c10::StringType::get(), c10::TensorType::get()));
  nested.insert("epoch", int64_t{3});
  const std::vector<std::pair<std::string, c10::IValue>> cases = {
      {"a tensor", torch::ones({2})}, {"a list", list}, {"an int", int64_t{7}}, {"\"model\" holds a dict", nested}};
  for (const auto& [what, value] : cases) {
    std::string path = write_bytes(dir, "value.pt", torch::pickle_save(value));
    expect_mentions(load_error(path), {path, "expected a dict of name -> tensor", what, kPlainDictHint});
  }
}

TEST(StateDictErrors, PythonNonStateDictObjects) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"module", "unsupported Python object torch_reference.Net"},
      {"list", "found a list"},
      {"checkpoint", "\"model\" holds a dict"}};
  std::string commands;  // one oracle process writes the three files
  for (const auto& [what, expected] : cases)
    commands += (commands.empty() ? "" : " then ") + ("save-other " + what + " " + shell_quote(dir / (what + ".pt")));
  run_oracle(commands);
  for (const auto& [what, expected] : cases) {
    const std::string path = dir / (what + ".pt");
    expect_mentions(load_error(path), {path, expected, kPlainDictHint});
  }
}

}  // namespace
}  // namespace ddp::test
