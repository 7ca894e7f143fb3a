// Tests: crafted torch.save files (deep nesting, shared-object bombs, cycles, zip bombs, lying views) end in one
// error naming the file, within bounded time and memory, and never crash.
#include "checkpoint/state_dict.h"
#include "tests/support/child_run.h"
#include "tests/support/test_support.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <filesystem>

namespace ddp::test {
namespace {

// A torch.save-style archive whose data.pkl is `pickle` and whose other records are `records` (name, bytes,
// deflated?).
struct HostileRecord {
  std::string name;
  std::string bytes;
  bool compress = false;
};

std::string hostile_archive(const std::string& pickle, const std::vector<HostileRecord>& records = {}) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  for (const auto& r : records) writer.writeRecord(r.name, r.bytes.data(), r.bytes.size(), r.compress);
  writer.writeEndOfFile();
  return out;
}

// What reading `path` as a state dict does in a child process: its error, or "read".
ChildRun read_in_child(const std::string& path, unsigned timeout_s = 60) {
  return run_in_child(
      [&] {
        read_torch_save_file(path);
        return std::string("read");
      },
      timeout_s);
}

void expect_clean_error(const ChildRun& run, const std::string& path, const std::string& what) {
  ASSERT_TRUE(run.exited) << "the reader died with signal " << run.signal << " (" << strsignal(run.signal) << ")";
  EXPECT_EQ(run.result.rfind("threw: " + path + ": ", 0), 0u) << run.result;
  EXPECT_NE(run.result.find(what), std::string::npos) << "missing \"" << what << "\" in: " << run.result;
}

TEST(HostileTorchSave, MillionNestedTuplesAreRefusedWithoutCrashing) {
  // PROTO 2, (), then TUPLE1 a million times: a tuple nested 10^6 deep in 1 MB. Freeing it recursively
  // overflowed the stack (SIGSEGV) on every rank.
  TempDir dir;
  std::string pickle = "\x80\x02)";
  pickle += std::string(1000000, '\x85');
  pickle += '.';
  write_file(dir / "tuples.pt", hostile_archive(pickle));
  const ChildRun run = read_in_child(dir / "tuples.pt");
  expect_clean_error(run, dir / "tuples.pt", "nested more than 1000 levels deep");
  std::cout << "[ measured ] reading 10^6 nested tuples (1 MB) grew the reader by " << run.peak_growth_mb << " MB\n";
  EXPECT_LT(run.peak_growth_mb, 256);  // ~120 bytes per parsed object
}

TEST(HostileTorchSave, NestedDictsAreRefusedWithoutCrashing) {
  // {0: {0: {0: ...}}} 3x10^5 deep: EMPTY_DICT, then (BININT1 0, EMPTY_DICT) per level, then SETITEM per level.
  TempDir dir;
  const int levels = 300000;
  std::string pickle = "\x80\x02}";
  for (int i = 0; i < levels; ++i) pickle += std::string("K\x00}", 3);
  pickle += std::string(levels, 's');
  pickle += '.';
  write_file(dir / "dicts.pt", hostile_archive(pickle));
  expect_clean_error(read_in_child(dir / "dicts.pt"), dir / "dicts.pt", "nested more than 1000 levels deep");
}

TEST(HostileTorchSave, SharedObjectBombReadsInLinearTime) {
  // t = (); then 60 times t = (t, t) through the memo: 2^60 paths in 300 bytes. Converted once per object, it is
  // read at once (nested 60 deep: allowed); walked per path it never finished.
  TempDir dir;
  std::string pickle = "\x80\x02)";
  for (int i = 0; i < 60; ++i) pickle += std::string("q\x00h\x00\x86", 5);
  pickle += '.';
  write_file(dir / "bomb.pt", hostile_archive(pickle));
  const ChildRun run = read_in_child(dir / "bomb.pt", 20);
  ASSERT_TRUE(run.exited) << "killed by signal " << run.signal << " (time limit 20 s)";
  EXPECT_EQ(run.result, "read");
}

TEST(HostileTorchSave, SelfReferencingListIsRefused) {
  // l = []; l.append(l): a cycle, which the shared-pointer objects leaked.
  TempDir dir;
  write_file(dir / "cycle.pt", hostile_archive(std::string("\x80\x02]q\x00h\x00" "a.", 9)));
  expect_clean_error(read_in_child(dir / "cycle.pt"), dir / "cycle.pt", "a list contains itself");
}

// A real torch.save of {"w": zeros(numel)} with its storage record data/0 deflated: a zip bomb of a state dict.
std::string zip_bomb_state_dict(int64_t numel) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", torch::zeros({numel}));
  const std::vector<char> plain = torch::pickle_save(dict);
  struct Bytes final : caffe2::serialize::ReadAdapterInterface {
    const std::vector<char>& b;
    explicit Bytes(const std::vector<char>& bytes) : b(bytes) {}
    size_t size() const override { return b.size(); }
    size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
      n = pos >= b.size() ? 0 : std::min<size_t>(n, b.size() - pos);
      std::memcpy(buf, b.data() + pos, n);
      return n;
    }
  };
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<Bytes>(plain));
  auto [pkl, pkl_size] = reader.getRecord("data.pkl");
  auto [storage, storage_size] = reader.getRecord("data/0");
  return hostile_archive(std::string(static_cast<const char*>(pkl.get()), pkl_size),
                         {{"data/0", std::string(static_cast<const char*>(storage.get()), storage_size), true}});
}

TEST(HostileTorchSave, ZipBombIsRefusedBeforeInflating) {
  // 64 MiB of float zeros deflated into ~65 kB: the reader allocated and inflated all of it (and copied it once
  // more into the tensor) before anything was checked; a 1.1 MB bomb as model.init_from peaked at 1.2 GB.
  TempDir dir;
  const int64_t numel = int64_t{16} << 20;
  write_file(dir / "bomb.pt", zip_bomb_state_dict(numel));
  ASSERT_LT(std::filesystem::file_size(dir / "bomb.pt"), 2u << 20);
  const ChildRun run = read_in_child(dir / "bomb.pt");
  expect_clean_error(run, dir / "bomb.pt", "zip bomb");
  std::cout << "[ measured ] reading a 64 MiB zip bomb grew the reader by " << run.peak_growth_mb << " MB\n";
  EXPECT_LT(run.peak_growth_mb, 16);
}

TEST(HostileTorchSave, DeflatedRecordsWithinTheFileSizeStillRead) {
  // Deflate itself is not refused: a compressed storage whose contents fit in the archive's size reads as usual.
  TempDir dir;
  write_file(dir / "small.pt", zip_bomb_state_dict(16));
  const NamedTensors state = load_state_dict_file(dir / "small.pt");
  ASSERT_EQ(state.size(), 1u);
  EXPECT_TRUE(torch::equal(state[0].second, torch::zeros({16})));
}

TEST(HostileTorchSave, ExpandedViewLargerThanItsStorageIsRefused) {
  // {"w": a view of 2^40 elements with stride 0 over a 1-float storage}: 4 bytes standing for 4 TiB once copied.
  TempDir dir;
  const std::string pickle = std::string("\x80\x02}X\x01\x00\x00\x00w", 9) +
                             "ctorch._utils\n_rebuild_tensor_v2\n((" + std::string("X\x07\x00\x00\x00storage", 12) +
                             "ctorch\nFloatStorage\n" + std::string("X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpuK\x01tQK\x00", 20) +
                             std::string("(\x8a\x06\x00\x00\x00\x00\x00\x01t(K\x00t\x89", 15) +
                             "ccollections\nOrderedDict\n)RtRs.";
  write_file(dir / "view.pt", hostile_archive(pickle, {{"data/0", std::string(4, '\0')}}));
  expect_clean_error(read_in_child(dir / "view.pt"), dir / "view.pt", "expanded or overlapping views are not supported");
}

TEST(HostileTorchSave, DeviceFileIsRefusedAtOnce) {
  // model.init_from = "/dev/zero": read to its (never coming) end, memory growing until killed.
  const ChildRun run = read_in_child("/dev/zero", 10);
  expect_clean_error(run, "/dev/zero", "not a regular file");
  EXPECT_LT(run.peak_growth_mb, 16);
}

TEST(HostileTorchSave, FuzzSeedCorpusReads) {
  // The seeds (real torch.save files, tests/fuzz/make_corpus.py) are valid: the fuzzer mutates readable files.
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/tests/fuzz/corpus/torch_save")) {
    if (entry.path().extension() != ".pt") continue;
    ++seeds;
    EXPECT_NO_THROW(read_torch_save_file(entry.path())) << entry.path();
  }
  EXPECT_GE(seeds, 6);
}

}  // namespace
}  // namespace ddp::test
