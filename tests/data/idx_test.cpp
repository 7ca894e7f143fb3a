// Tests for the IDX reader/writer and MNIST-format loading: round trips, real files against torchvision, errors.
#include "config/config.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ddp {
namespace {

namespace fs = std::filesystem;

// load_dataset's download notes: these datasets download nothing.
void ignore_notes(const std::string&) {}

torch::Tensor random_bytes(std::vector<int64_t> dims, uint64_t seed) {
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  return torch::randint(0, 256, dims, gen, torch::kInt64).to(torch::kUInt8);
}

// The message read_idx / load_dataset throws, or "" (with a test failure) when it did not throw.
using test::error_of;

void expect_error(const std::string& path, const std::string& what) {
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message does not start with the file: " << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "missing \"" << what << "\" in: " << msg;
}

// ---------------------------------------------------------------- round trips

TEST(IdxRoundTrip, RawAndGzipForOneToFourDimensions) {
  test::TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {4, 28, 28}, {2, 3, 4, 5}, {1, 1, 1}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    torch::Tensor t = random_bytes(shapes[i], i + 1);
    for (const std::string ext : {"", ".gz"}) {
      std::string path = dir / ("t" + std::to_string(i) + ext);
      write_idx(path, t);
      torch::Tensor back = read_idx(path);
      EXPECT_EQ(back.scalar_type(), torch::kUInt8);
      EXPECT_EQ(back.sizes(), t.sizes()) << path;
      EXPECT_TRUE(torch::equal(back, t)) << path;
    }
  }
}

TEST(IdxRoundTrip, RawFileIsTheIdxLayout) {
  test::TempDir dir;
  torch::Tensor t = random_bytes({2, 3, 4}, 9);
  write_idx(dir / "x", t);
  std::string bytes = test::read_file(dir / "x");
  const std::string header("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04", 16);
  ASSERT_EQ(bytes.size(), header.size() + 24);
  EXPECT_EQ(bytes.substr(0, 16), header);
  EXPECT_EQ(std::memcmp(bytes.data() + 16, t.data_ptr<uint8_t>(), 24), 0);
  write_idx(dir / "x.gz", t);
  std::string gz = test::read_file(dir / "x.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz.substr(0, 2), std::string("\x1f\x8b"));
}

// Several gzip members and zero padding after the last one are legal gzip (Python's gzip reads them).
TEST(IdxRoundTrip, ConcatenatedGzipMembersAndZeroPadding) {
  test::TempDir dir;
  torch::Tensor t = random_bytes({6, 5}, 3);
  write_idx(dir / "whole", t);
  std::string raw = test::read_file(dir / "whole");
  test::write_file(dir / "a", raw.substr(0, 10));
  test::write_file(dir / "b", raw.substr(10));
  auto r = test::run_command("cd " + test::shell_quote(dir.path()) +
                             " && gzip -c a > joined.gz && gzip -c b >> joined.gz && printf '\\0\\0\\0' >> joined.gz");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(torch::equal(read_idx(dir / "joined.gz"), t));
}

// ---------------------------------------------------------------- errors, each naming the file

class IdxErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = random_bytes({3, 4, 5}, 7);
    write_idx(dir_ / "good", good_);
    write_idx(dir_ / "good.gz", good_);
    raw_ = test::read_file(dir_ / "good");
    gz_ = test::read_file(dir_ / "good.gz");
  }
  test::TempDir dir_;
  torch::Tensor good_;
  std::string raw_, gz_;
};

TEST_F(IdxErrors, MissingFile) { expect_error(dir_ / "absent-idx3-ubyte", "cannot open IDX file: No such file"); }

TEST_F(IdxErrors, Directory) { expect_error(dir_.path(), "is a directory"); }

TEST_F(IdxErrors, EmptyFile) {
  test::write_file(dir_ / "empty", "");
  expect_error(dir_ / "empty", "truncated IDX header");
}

TEST_F(IdxErrors, TruncatedHeader) {
  test::write_file(dir_ / "short", raw_.substr(0, 10));  // magic + 1.5 of 3 dims
  expect_error(dir_ / "short", "truncated IDX header");
  test::write_file(dir_ / "magic-only", raw_.substr(0, 3));
  expect_error(dir_ / "magic-only", "truncated IDX header");
}

TEST_F(IdxErrors, TruncatedData) {
  test::write_file(dir_ / "cut", raw_.substr(0, raw_.size() - 1));
  expect_error(dir_ / "cut", "truncated IDX data: expected 60 bytes, found 59");
}

TEST_F(IdxErrors, TrailingBytes) {
  test::write_file(dir_ / "long", raw_ + "x");
  expect_error(dir_ / "long", "trailing bytes after IDX data");
}

TEST_F(IdxErrors, BadMagic) {
  std::string floats = raw_;
  floats[2] = 0x09;  // 0x00000903: signed bytes
  test::write_file(dir_ / "int8", floats);
  expect_error(dir_ / "int8", "bad IDX magic 0x00000903");
  std::string five = raw_;
  five[3] = 0x05;  // five dimensions
  test::write_file(dir_ / "five", five);
  expect_error(dir_ / "five", "bad IDX magic 0x00000805");
  test::write_file(dir_ / "text.txt", "hello, this is not an IDX file\n");
  expect_error(dir_ / "text.txt", "bad IDX magic 0x68656c6c");
}

TEST_F(IdxErrors, ZeroDimension) {
  std::string zero = raw_;
  zero[7] = 0;  // first dimension 3 -> 0
  test::write_file(dir_ / "zero", zero);
  expect_error(dir_ / "zero", "invalid IDX dimension 0 = 0");
}

TEST_F(IdxErrors, CorruptGzip) {
  std::string bad = gz_;
  for (size_t i = 12; i < bad.size() - 8; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  test::write_file(dir_ / "corrupt.gz", bad);
  expect_error(dir_ / "corrupt.gz", "corrupt gzip data");
}

TEST_F(IdxErrors, GzipChecksumMismatch) {
  std::string bad = gz_;
  bad[bad.size() - 8] = static_cast<char>(bad[bad.size() - 8] ^ 1);  // CRC32 in the trailer
  test::write_file(dir_ / "crc.gz", bad);
  expect_error(dir_ / "crc.gz", "corrupt gzip data: incorrect data check");
}

TEST_F(IdxErrors, TruncatedGzip) {
  test::write_file(dir_ / "cut.gz", gz_.substr(0, gz_.size() / 2));
  expect_error(dir_ / "cut.gz", "truncated gzip data");
  test::write_file(dir_ / "no-trailer.gz", gz_.substr(0, gz_.size() - 4));
  expect_error(dir_ / "no-trailer.gz", "truncated gzip data");
}

TEST_F(IdxErrors, GarbageAfterGzip) {
  test::write_file(dir_ / "garbage.gz", gz_ + "xyz");
  expect_error(dir_ / "garbage.gz", "trailing bytes after the gzip data");
}

TEST_F(IdxErrors, TruncatedDataInsideGzip) {
  test::write_file(dir_ / "cut", raw_.substr(0, raw_.size() - 5));
  auto r = test::run_command("gzip -c " + test::shell_quote(dir_ / "cut") + " > " + test::shell_quote(dir_ / "cut.gz"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_error(dir_ / "cut.gz", "truncated IDX data: expected 60 bytes, found 55");
}

// ---------------------------------------------------------------- MNIST-format directories

DataConfig mnist_config(const std::string& dir) {
  DataConfig d;
  d.dataset = DatasetChoice{"mnist"};
  d.dir = dir;
  return d;
}

TEST(IdxDataset, LoadsATinyDirectory) {
  test::TempDir dir;
  test::write_tiny_mnist(dir.path(), 12, 5, 3);
  Dataset ds = load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes);
  EXPECT_EQ(ds.train.images.sizes(), (std::vector<int64_t>{12, 1, 28, 28}));
  // The test images are checked at load but held only from their first use (evaluation).
  EXPECT_FALSE(ds.test.images.defined());
  EXPECT_EQ(ds.test.size(), 5);
  EXPECT_EQ(ds.test.ensure_images().sizes(), (std::vector<int64_t>{5, 1, 28, 28}));
  // Released train images come back the same.
  const torch::Tensor train_images = ds.train.images.clone();
  ds.train.release_images();
  EXPECT_FALSE(ds.train.images.defined());
  EXPECT_TRUE(torch::equal(ds.train.ensure_images(), train_images));
  EXPECT_EQ(ds.train.labels.scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(ds.train.labels, read_idx(dir / "train-labels-idx1-ubyte.gz").to(torch::kInt64)));
  EXPECT_TRUE(torch::equal(ds.test.images.squeeze(1), read_idx(dir / "t10k-images-idx3-ubyte.gz")));
}

TEST(IdxDataset, CountMismatchNamesBothFiles) {
  test::TempDir dir;
  test::write_tiny_mnist(dir.path(), 6, 4, 1);
  write_idx(dir / "t10k-labels-idx1-ubyte.gz", torch::zeros({3}, torch::kUInt8));
  std::string msg = error_of([&] { load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes); });
  EXPECT_NE(msg.find(dir / "t10k-images-idx3-ubyte.gz has 4 images"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir / "t10k-labels-idx1-ubyte.gz has 3 labels"), std::string::npos) << msg;
}

TEST(IdxDataset, MissingFileNamesThePath) {
  test::TempDir dir;
  test::write_tiny_mnist(dir.path(), 6, 4, 1);
  fs::remove(dir / "train-labels-idx1-ubyte.gz");
  std::string msg = error_of([&] { load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes); });
  EXPECT_EQ(msg.rfind(dir / "train-labels-idx1-ubyte[.gz]: file not found", 0), 0u) << msg;
}

TEST(IdxDataset, WrongShapesNameTheFile) {
  test::TempDir dir;
  test::write_tiny_mnist(dir.path(), 6, 4, 1);
  write_idx(dir / "train-images-idx3-ubyte.gz", torch::zeros({6, 32, 32}, torch::kUInt8));
  std::string msg = error_of([&] { load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes); });
  EXPECT_EQ(msg.rfind(dir / "train-images-idx3-ubyte.gz: expected 28x28 images", 0), 0u) << msg;
  write_idx(dir / "train-images-idx3-ubyte.gz", torch::zeros({6, 28, 28}, torch::kUInt8));
  write_idx(dir / "train-labels-idx1-ubyte.gz", torch::zeros({6, 1}, torch::kUInt8));
  msg = error_of([&] { load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes); });
  EXPECT_EQ(msg.rfind(dir / "train-labels-idx1-ubyte.gz: expected 1 dimension", 0), 0u) << msg;
}

TEST(IdxDataset, CorruptFileInADirectoryNamesIt) {
  test::TempDir dir;
  test::write_tiny_mnist(dir.path(), 6, 4, 1);
  std::string bytes = test::read_file(dir / "t10k-images-idx3-ubyte.gz");
  test::write_file(dir / "t10k-images-idx3-ubyte.gz", bytes + "junk");
  std::string msg = error_of([&] { load_dataset(mnist_config(dir.path()), ModelConfig{}, 0, ignore_notes); });
  EXPECT_EQ(msg.rfind(dir / "t10k-images-idx3-ubyte.gz: trailing bytes", 0), 0u) << msg;
}

// ---------------------------------------------------------------- real files against torchvision

// torchvision 0.14's read_image_file / read_label_file read raw IDX, so the oracle gunzips first. For every
// file it writes the tensor's bytes (NAME.bytes) and, for labels, the label histogram (NAME.hist); for the
// images named by --normalize it writes ToTensor + Normalize(mean, std) of the chosen rows as float32.
const char* kOracle = R"PY(
import gzip, sys, os
import torch
from PIL import Image
from torchvision import transforms
from torchvision.datasets.mnist import read_image_file, read_label_file

out = sys.argv[1]
for spec in sys.argv[2:]:
    kind, path, name, *rest = spec.split("|")
    raw = os.path.join(out, name + ".raw")
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    with open(raw, "wb") as f:
        f.write(data)
    if kind == "labels":
        x = read_label_file(raw)
        with open(os.path.join(out, name + ".hist"), "w") as f:
            f.write(" ".join(str(v) for v in torch.bincount(x, minlength=10).tolist()))
        x = x.to(torch.uint8)
    else:
        x = read_image_file(raw)
    os.remove(raw)
    with open(os.path.join(out, name + ".bytes"), "wb") as f:
        f.write(x.contiguous().numpy().tobytes())
    with open(os.path.join(out, name + ".shape"), "w") as f:
        f.write(" ".join(str(v) for v in x.shape))
    if kind == "normalize":
        rows, mean, std = [int(v) for v in rest[0].split(",")], float(rest[1]), float(rest[2])
        t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((mean,), (std,))])
        y = torch.stack([t(Image.fromarray(x[i].numpy(), mode="L")) for i in rows])
        with open(os.path.join(out, name + ".normalized"), "wb") as f:
            f.write(y.numpy().astype("float32").tobytes())
)PY";

std::string repr(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const std::vector<int64_t> kRows = {0, 1, 2, 1234, 9999};

class IdxRealFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    oracle_ = std::make_unique<test::TempDir>();
    fashion_ = test::have_fashion_mnist();
    mnist_ = fs::exists(test::mnist_fixture_dir() + "/t10k-images-idx3-ubyte.gz") &&
             fs::exists(test::mnist_fixture_dir() + "/t10k-labels-idx1-ubyte.gz");
    Config fashion_cfg = parse_config("", "x.toml");
    Config mnist_cfg = parse_config("[data]\ndataset = \"mnist\"\n", "x.toml");
    std::string rows;
    for (int64_t r : kRows) rows += (rows.empty() ? "" : ",") + std::to_string(r);
    std::string args;
    auto add = [&](const std::string& kind, const std::string& path, const std::string& name, const Config& c) {
      args += " " + test::shell_quote(kind + "|" + path + "|" + name + "|" + rows + "|" + repr(c.data.mean.at(0)) +
                                      "|" + repr(c.data.std.at(0)));
    };
    const std::string f = test::fashion_mnist_dir() + "/", m = test::mnist_fixture_dir() + "/";
    if (fashion_) {
      add("images", f + "train-images-idx3-ubyte.gz", "fashion-train-images", fashion_cfg);
      add("labels", f + "train-labels-idx1-ubyte.gz", "fashion-train-labels", fashion_cfg);
      add("normalize", f + "t10k-images-idx3-ubyte.gz", "fashion-t10k-images", fashion_cfg);
      add("labels", f + "t10k-labels-idx1-ubyte.gz", "fashion-t10k-labels", fashion_cfg);
    }
    if (mnist_) {
      add("normalize", m + "t10k-images-idx3-ubyte.gz", "mnist-t10k-images", mnist_cfg);
      add("labels", m + "t10k-labels-idx1-ubyte.gz", "mnist-t10k-labels", mnist_cfg);
    }
    if (args.empty()) return;
    test::write_file(oracle_->path() + "/oracle.py", kOracle);
    auto r =
        test::run_command(test::shell_quote(test::python()) + " " + test::shell_quote(oracle_->path() + "/oracle.py") +
                          " " + test::shell_quote(oracle_->path()) + args);
    oracle_output_ = r.output;
    oracle_ok_ = r.exit_code == 0;
  }
  static void TearDownTestSuite() { oracle_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(oracle_ok_ || (!fashion_ && !mnist_)) << "python oracle failed:\n" << oracle_output_;
  }

  static std::string oracle(const std::string& file) { return test::read_file(oracle_->path() + "/" + file); }

  // read_idx gives torchvision's tensor: same shape, same bytes.
  static torch::Tensor expect_same_as_torchvision(const std::string& path, const std::string& name) {
    torch::Tensor t = read_idx(path);
    std::ostringstream shape;
    for (int64_t i = 0; i < t.dim(); ++i) shape << (i ? " " : "") << t.size(i);
    EXPECT_EQ(shape.str(), oracle(name + ".shape")) << path;
    std::string expected = oracle(name + ".bytes");
    EXPECT_EQ(static_cast<size_t>(t.numel()), expected.size()) << path;
    if (static_cast<size_t>(t.numel()) == expected.size()) {
      EXPECT_EQ(std::memcmp(t.data_ptr<uint8_t>(), expected.data(), expected.size()), 0) << path;
    }
    return t;
  }

  static std::string histogram(const torch::Tensor& labels) {
    torch::Tensor counts = torch::bincount(labels.to(torch::kInt64), {}, 10);
    std::string out;
    for (int64_t i = 0; i < counts.size(0); ++i) out += (i ? " " : "") + std::to_string(counts[i].item<int64_t>());
    return out;
  }

  // normalize_images of the chosen rows equals torchvision's ToTensor + Normalize bit for bit.
  static void expect_normalisation_matches(const torch::Tensor& images, const std::string& name, const Config& c) {
    torch::Tensor rows = images.index_select(0, torch::tensor(kRows)).unsqueeze(1);
    torch::Tensor y = normalize_images(rows, c.data.mean, c.data.std).contiguous();
    ASSERT_EQ(y.scalar_type(), torch::kFloat32);
    std::string expected = oracle(name + ".normalized");
    ASSERT_EQ(static_cast<size_t>(y.numel()) * 4, expected.size());
    EXPECT_EQ(std::memcmp(y.data_ptr<float>(), expected.data(), expected.size()), 0)
        << "max abs diff "
        << (y - torch::from_blob(expected.data(), y.sizes(), torch::kFloat32)).abs().max().item<float>();
  }

  static std::unique_ptr<test::TempDir> oracle_;
  static bool fashion_, mnist_, oracle_ok_;
  static std::string oracle_output_;
};

std::unique_ptr<test::TempDir> IdxRealFiles::oracle_;
bool IdxRealFiles::fashion_ = false, IdxRealFiles::mnist_ = false, IdxRealFiles::oracle_ok_ = false;
std::string IdxRealFiles::oracle_output_;

TEST_F(IdxRealFiles, FashionMnistMatchesTorchvision) {
  if (!fashion_) GTEST_SKIP() << test::fashion_mnist_dir() << " not present";
  const std::string f = test::fashion_mnist_dir() + "/";
  torch::Tensor train = expect_same_as_torchvision(f + "train-images-idx3-ubyte.gz", "fashion-train-images");
  torch::Tensor train_labels = expect_same_as_torchvision(f + "train-labels-idx1-ubyte.gz", "fashion-train-labels");
  torch::Tensor test_images = expect_same_as_torchvision(f + "t10k-images-idx3-ubyte.gz", "fashion-t10k-images");
  torch::Tensor test_labels = expect_same_as_torchvision(f + "t10k-labels-idx1-ubyte.gz", "fashion-t10k-labels");
  EXPECT_EQ(train.sizes(), (std::vector<int64_t>{60000, 28, 28}));
  EXPECT_EQ(test_images.sizes(), (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(train_labels.max().item<int64_t>(), 9);
  EXPECT_EQ(test_labels.max().item<int64_t>(), 9);
  EXPECT_EQ(histogram(train_labels), oracle("fashion-train-labels.hist"));
  EXPECT_EQ(histogram(test_labels), oracle("fashion-t10k-labels.hist"));
}

TEST_F(IdxRealFiles, FashionMnistLoadsThroughTheDatasetRegistry) {
  if (!fashion_) GTEST_SKIP() << test::fashion_mnist_dir() << " not present";
  Config cfg = parse_config("", "x.toml");
  Dataset ds = load_dataset(cfg.data, cfg.model, 0, ignore_notes);
  EXPECT_EQ(ds.train.size(), 60000);
  EXPECT_EQ(ds.test.size(), 10000);
  EXPECT_EQ(histogram(ds.test.labels), oracle("fashion-t10k-labels.hist"));
}

TEST_F(IdxRealFiles, FashionMnistNormalisationIsTorchvisions) {
  if (!fashion_) GTEST_SKIP() << test::fashion_mnist_dir() << " not present";
  torch::Tensor images = read_idx(test::fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz");
  expect_normalisation_matches(images, "fashion-t10k-images", parse_config("", "x.toml"));
}

TEST_F(IdxRealFiles, MnistTestSplitMatchesTorchvision) {
  ASSERT_TRUE(mnist_) << test::mnist_fixture_dir() << " has no t10k files";
  const std::string m = test::mnist_fixture_dir() + "/";
  torch::Tensor images = expect_same_as_torchvision(m + "t10k-images-idx3-ubyte.gz", "mnist-t10k-images");
  torch::Tensor labels = expect_same_as_torchvision(m + "t10k-labels-idx1-ubyte.gz", "mnist-t10k-labels");
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(histogram(labels), oracle("mnist-t10k-labels.hist"));
  // The published MNIST test-set class counts (torchvision's bincount gives the same, checked above).
  EXPECT_EQ(histogram(labels), "980 1135 1032 1010 982 892 958 1028 974 1009");
  expect_normalisation_matches(images, "mnist-t10k-images", parse_config("[data]\ndataset = \"mnist\"\n", "x.toml"));
}

}  // namespace
}  // namespace ddp
