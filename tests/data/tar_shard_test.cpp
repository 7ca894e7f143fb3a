// WebDataset shards: patterns expand into the shards webdataset's expand_urls names, a shard's samples are the ones
// Python's webdataset reads from it (keys, extensions, bytes), and a bad shard is one line naming it and its member.
#include "data/shard_patterns.h"
#include "data/tar_shard.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

bool have_webdataset() { return python_has_modules("webdataset"); }

// Two shards in `dir`: shard-000.tar written by webdataset's TarWriter (keys with folders, several extensions),
// shard-001.tar by tarfile with what webdataset passes over or folds (metadata, a folder, a name without a dot, a
// symbolic link, upper-case and two-part extensions); then every sample webdataset reads from them, in order, as
// "key ext:size:sha1 ..." lines (extensions sorted). Also shard-000.tar compressed with gzip and with xz.
constexpr const char* kShardsAndTheirSamples = R"(
import hashlib, io, random, sys, tarfile
import webdataset as wds
d = sys.argv[1]
rng = random.Random(5)
def blob(n):
    return bytes(rng.randrange(256) for _ in range(n))
with wds.TarWriter(d + "/shard-000.tar", encoder=False) as w:
    for i in range(12):
        w.write({"__key__": "train/n%02d/img_%04d" % (i % 3, i), "jpg": blob(100 + 37 * i),
                 "cls": str(i % 3).encode(), "json": b'{"i": %d}' % i})
def add(t, name, data, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "a.jpg"
        t.addfile(info)
    elif kind == tarfile.DIRTYPE:
        t.addfile(info)
    else:
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
with tarfile.open(d + "/shard-001.tar", "w", format=tarfile.GNU_FORMAT) as t:
    add(t, "__meta__", b"{}")
    add(t, "__index__/x.json", b"{}")
    add(t, "folder", b"", tarfile.DIRTYPE)
    add(t, "README", b"no dot")
    add(t, "a.JPG", blob(50))
    add(t, "a.cls", b"2")
    add(t, "a.seg.png", blob(20))
    add(t, "link.jpg", b"", tarfile.SYMTYPE)
    add(t, "b.jpg", blob(30))
    add(t, "b.cls", b"0")
    add(t, "deep/" + "x" * 120 + ".webp", blob(10))
import gzip, lzma, shutil
for name, opener in (("gz", gzip.open), ("xz", lzma.open)):
    with open(d + "/shard-000.tar", "rb") as src, opener(d + "/shard-000.tar." + name, "wb") as dst:
        shutil.copyfileobj(src, dst)
for s in wds.WebDataset([d + "/shard-000.tar", d + "/shard-001.tar"], shardshuffle=False, empty_check=False):
    exts = sorted(k for k in s if not k.startswith("__"))
    print(s["__key__"], " ".join("%s:%d:%s" % (e, len(s[e]), hashlib.sha1(s[e]).hexdigest()) for e in exts))
)";

// The same lines from TarShardReader, the sha1s from Python's hashlib over the bytes written to a file.
std::string reader_lines(const std::vector<std::string>& shards, const TempDir& dir) {
  std::string listing;
  int n = 0;
  for (const std::string& shard : shards) {
    TarShardReader reader(shard, shard);
    while (auto sample = reader.next()) {
      std::vector<std::pair<std::string, std::string>> members = sample->members;
      std::sort(members.begin(), members.end());
      listing += sample->key;
      for (const auto& [ext, bytes] : members) {
        const std::string file = dir / ("member" + std::to_string(n++));
        write_file(file, bytes);
        listing += " " + ext + ":" + std::to_string(bytes.size()) + ":@" + file;
      }
      listing += "\n";
    }
  }
  // Each "@FILE" replaced by the sha1 of its contents.
  const std::string script = R"py(
import hashlib, re, sys
text = open(sys.argv[1]).read()
print(re.sub(r"@(\S+)", lambda m: hashlib.sha1(open(m.group(1), "rb").read()).hexdigest(), text), end="")
)py";
  write_file(dir / "listing.txt", listing);
  const CommandResult r = run_command(python() + " -c " + shell_quote(script) + " " + shell_quote(dir / "listing.txt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(TarShards, ASamplesKeyExtensionsAndBytesAreThoseWebdatasetReads) {
  if (!have_webdataset()) GTEST_SKIP() << "no webdataset in " << python();
  TempDir dir;
  const CommandResult oracle = run_command(python() + " -c " + shell_quote(kShardsAndTheirSamples) + " " + dir.path());
  ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
  const std::string mine = reader_lines({dir / "shard-000.tar", dir / "shard-001.tar"}, dir);
  EXPECT_EQ(mine, oracle.output);
  EXPECT_EQ(count_of(oracle.output, "\n"), 15u) << oracle.output;  // 12 + a, b and the long name's sample
  // The first shard compressed (gzip, xz), as tarfile reads it: the same samples.
  const std::string plain = reader_lines({dir / "shard-000.tar"}, dir);
  EXPECT_EQ(reader_lines({dir / "shard-000.tar.gz"}, dir), plain);
  EXPECT_EQ(reader_lines({dir / "shard-000.tar.xz"}, dir), plain);
}

// Each sample's place in its shard: tarfile's offset of its first member (extended headers included) up to the next
// sample's, or to the end of the archive; "key offset length" lines.
constexpr const char* kSamplePlaces = R"py(
import re, sys, tarfile
for path in sys.argv[1:]:
    with tarfile.open(path) as t:
        members = t.getmembers()
        end = t.offset
    starts, key = [], None
    for m in members:
        last = m.name.split("/")[-1]
        if not m.isreg() or "." not in last or re.match(r"__[^/]*__($|/)", m.name):
            continue
        k = m.name[: len(m.name) - len(last)] + last.split(".")[0]
        if k != key:
            starts.append((k, m.offset))
            key = k
    for i, (k, offset) in enumerate(starts):
        stop = starts[i + 1][1] if i + 1 < len(starts) else end
        print(k, offset, stop - offset)
)py";

TEST(TarShards, ASamplesPlaceIsTarfilesAndItsBytesAloneReadAsIt) {
  if (!have_webdataset()) GTEST_SKIP() << "no webdataset in " << python();
  TempDir dir;
  const CommandResult made = run_command(python() + " -c " + shell_quote(kShardsAndTheirSamples) + " " + dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::vector<std::string> shards = {dir / "shard-000.tar", dir / "shard-001.tar"};
  const CommandResult oracle = run_command(python() + " -c " + shell_quote(kSamplePlaces) + " " +
                                           shell_quote(shards[0]) + " " + shell_quote(shards[1]));
  ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
  std::string mine;
  for (const std::string& shard : shards) {
    const std::string bytes = read_file(shard);
    TarShardReader reader(shard, shard);
    while (auto sample = reader.next()) {
      mine += sample->key + " " + std::to_string(sample->offset) + " " + std::to_string(sample->length) + "\n";
      // The sample's bytes alone: one sample, the same.
      ASSERT_LE(sample->offset + sample->length, static_cast<int64_t>(bytes.size()));
      TarShardReader alone(bytes.data() + sample->offset, static_cast<size_t>(sample->length), shard, false);
      const std::optional<ShardSample> again = alone.next();
      ASSERT_TRUE(again.has_value()) << sample->key;
      EXPECT_EQ(again->key, sample->key);
      EXPECT_EQ(again->members, sample->members) << sample->key;
      EXPECT_FALSE(alone.next().has_value()) << sample->key;
    }
  }
  EXPECT_EQ(mine, oracle.output);
  EXPECT_EQ(count_of(oracle.output, "\n"), 15u) << oracle.output;
  // A compressed shard's places are those of its decompressed stream.
  std::string plain, gzipped;
  for (auto [file, out] : {std::pair{shards[0], &plain}, std::pair{shards[0] + ".gz", &gzipped}}) {
    TarShardReader reader(file, file);
    while (auto sample = reader.next())
      *out += std::to_string(sample->offset) + "+" + std::to_string(sample->length) + " ";
  }
  EXPECT_EQ(gzipped, plain);
}

TEST(TarShards, PatternsExpandAsWebdatasetsExpandUrls) {
  if (!have_webdataset()) GTEST_SKIP() << "no webdataset in " << python();
  const std::vector<std::string> patterns = {
      "/data/train-{000000..000011}.tar",
      "a{1..3}b::c{x,y}",
      "{07..10}",
      "{2..-1}",
      "{-05..3}",
      "{0..3}",
      "x{1..10..3}",
      "{a..g..2}",
      "{Z..b}",
      "{e..a}",
      "python{2.{5..7},3.{2,3}}",
      "index.html{,.backup}",
      R"({1\{2,3})",
      R"(a\,b{c,d})",
      "{}",
      "{a}",
      "{a..}",
      "pipe:aws s3 cp s3://bucket/train-{0..2}.tar -",
      "https://host/shards/s-{00..02}.tar::/local/{a,b}.tar",
      "plain.tar",
  };
  std::string script = "import webdataset.shardlists as s\nfor p in [";
  for (const std::string& p : patterns) script += "r'" + p + "', ";
  script += "]:\n    print('\\n'.join(s.expand_urls(p)))\n    print('--')\n";
  const CommandResult oracle = run_command(python() + " -c " + shell_quote(script));
  ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
  std::string mine;
  for (const std::string& p : patterns) {
    for (const std::string& shard : expand_shard_patterns(p)) mine += shard + "\n";
    mine += "--\n";
  }
  EXPECT_EQ(mine, oracle.output);
  EXPECT_EQ(expand_shard_patterns(patterns[0]).size(), 12u);
  // Unbalanced braces: braceexpand raises, and so does the expansion here, naming the pattern.
  const CommandResult unbalanced =
      run_command(python() + " -c " + shell_quote("import webdataset.shardlists as s; s.expand_urls('{1{2,3}')"));
  EXPECT_NE(unbalanced.exit_code, 0);
  try {
    expand_shard_patterns("x::{1{2,3}");
    ADD_FAILURE() << "no error for unbalanced braces";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unbalanced braces in the shard pattern \"{1{2,3}\"");
  }
  // A pattern expands eagerly: one that names more than 2^20 shards, in a range or a product of them, fails naming
  // itself instead of filling the memory; so does a bound past 64 bits (braceexpand takes any integer). Just under the
  // limit, the count is exact.
  for (const char* text : {"s-{0..1048576}.tar", "s-{0..1023}-{0..1024}.tar", "{a..z}{0..99999}.tar",
                           "s-{0..99999999999999999999}.tar", "s-{9223372036854775807..-9223372036854775808}"}) {
    const std::string pattern = text;
    try {
      expand_shard_patterns("ok.tar::" + pattern);
      ADD_FAILURE() << "no error for " << pattern;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + pattern + "\""), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(expand_shard_patterns("s-{0..1048575}.tar").size(), 1048576u);
  EXPECT_EQ(expand_shard_patterns("{9223372036854775805..9223372036854775807}").back(), "9223372036854775807");
}

// Bad shards written by tarfile; each one's first error line, from the first sample on.
constexpr const char* kBadShards = R"(
import io, os, sys, tarfile
d = sys.argv[1]
def tar(path, members):
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
tar(d + "/good.tar", [("a.jpg", b"x" * 5000), ("a.cls", b"1"), ("b.jpg", b"y" * 5000), ("b.cls", b"2")])
data = open(d + "/good.tar", "rb").read()
open(d + "/cut_in_member.tar", "wb").write(data[:512 + 2000])  # a.jpg's header claims 5000 bytes
open(d + "/cut_in_header.tar", "wb").write(data[:512 + 5120 + 100])  # inside a.cls's header
tar(d + "/dotdot.tar", [("a.jpg", b"1"), ("x/../../etc/b.jpg", b"2")])
tar(d + "/absolute.tar", [("/etc/a.jpg", b"1")])
tar(d + "/twice.tar", [("a.jpg", b"1"), ("a.jpg", b"2")])
open(d + "/empty.tar", "wb").close()
tar(d + "/no_sample.tar", [("README", b"nothing here")])
open(d + "/not_a_tar.tar", "wb").write(b"this is not a tar file at all" * 40)
# A GNU header whose real-size field (offset 483, base-256) claims 2^29 + 1 bytes for a two-byte member, which
# libarchive reads as the member's size and pads it to with zeros.
tar(d + "/huge.tar", [("a.jpg", b"12"), ("a.cls", b"1")])
data = bytearray(open(d + "/huge.tar", "rb").read())
def real_size(name, size):
    data = bytearray(open(d + "/huge.tar", "rb").read())
    data[483:495] = bytes([0x80]) + size.to_bytes(11, "big")
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % sum(data[:512])
    open(d + "/" + name, "wb").write(bytes(data))
real_size("real_size.tar", 1000)  # tarfile reads the field for sparse members only: a.jpg is b"12" to it
real_size("huge.tar", (1 << 29) + 1)
)";

// The error reading the whole shard `path` (called `name`) gives; "" when none.
std::string first_error(const std::string& path, const std::string& name) {
  try {
    TarShardReader reader(path, name);
    while (reader.next()) {
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(TarShards, ABadShardIsOneLineNamingItAndItsMember) {
  TempDir dir;
  const CommandResult made = run_command(python() + " -c " + shell_quote(kBadShards) + " " + dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_EQ(first_error(dir / "good.tar", "good.tar"), "");
  const auto expect_error = [&](const std::string& shard, const std::string& says) {
    const std::string error = first_error(dir / shard, "s3://bucket/" + shard);
    EXPECT_EQ(error.rfind("shard s3://bucket/" + shard + ": ", 0), 0u) << error;
    EXPECT_NE(error.find(says), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  };
  expect_error("cut_in_member.tar", "member \"a.jpg\": ");
  expect_error("cut_in_header.tar", "runcated");
  expect_error("dotdot.tar", "member \"x/../../etc/b.jpg\": an absolute name or one with a \"..\" part");
  expect_error("absolute.tar", "member \"/etc/a.jpg\": an absolute name");
  expect_error("twice.tar", "member \"a.jpg\": sample \"a\" has a second .jpg");
  expect_error("empty.tar", "holds no sample");
  expect_error("no_sample.tar", "holds no sample");
  expect_error("not_a_tar.tar", "");
  expect_error("huge.tar", "member \"a.jpg\": 536870913 bytes, over the 268435456 ddptrain reads for one sample");
  expect_error("real_size.tar", "member \"a.jpg\": its header says 1000 bytes, the shard holds 2");
  EXPECT_NE(first_error(dir / "missing.tar", "missing.tar").find("shard missing.tar: "), std::string::npos);
}

// A sparse member written by GNU tar (--sparse): its bytes are the ones Python's tarfile expands it to, holes read as
// zeros; a sample whose sparse members hold over TarShardReader::kMaxSampleBytes together is refused at the member
// that goes over.
TEST(TarShards, ASparseMembersBytesAreTheOnesTarfileExpandsItToUpToTheSamplesBound) {
  TempDir dir;
  const CommandResult made = run_command(python() + " -c " + shell_quote(R"(
import os, subprocess, sys, tarfile
d = sys.argv[1]
os.makedirs(d + "/in")
with open(d + "/in/s.bin", "wb") as f:
    f.write(b"head")
    f.seek(3 << 20)
    f.write(b"middle" * 1000)
    f.seek(9 << 20)
    f.write(b"tail")
    f.truncate((9 << 20) + 8192)
open(d + "/in/s.cls", "w").write("1")
subprocess.check_call(["tar", "--sparse", "--format=gnu", "-cf", d + "/sparse.tar", "-C", d + "/in", "s.bin", "s.cls"])
for ext in ("a", "b", "c"):
    with open(d + "/in/big." + ext, "wb") as f:
        f.write(b"x")
        f.truncate(100 << 20)
subprocess.check_call(["tar", "--sparse", "--format=posix", "-cf", d + "/big.tar", "-C", d + "/in", "big.a", "big.b",
                       "big.c"])
with tarfile.open(d + "/sparse.tar") as t:
    member = t.getmember("s.bin")
    assert member.issparse()
    open(d + "/expected.bin", "wb").write(t.extractfile(member).read())
)") + " " + dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string expected = read_file(dir / "expected.bin");
  ASSERT_EQ(expected.size(), (9u << 20) + 8192u);
  TarShardReader reader(dir / "sparse.tar", "sparse.tar");
  const std::optional<ShardSample> sample = reader.next();
  ASSERT_TRUE(sample);
  EXPECT_EQ(sample->key, "s");
  const std::string* bytes = sample->find("bin");
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->size(), expected.size());
  EXPECT_TRUE(*bytes == expected);
  EXPECT_FALSE(reader.next());
  try {
    TarShardReader big(dir / "big.tar", "big.tar");
    big.next();
    ADD_FAILURE() << "a sample of three members of 100 MiB read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "shard big.tar: member \"big.c\": 104857600 bytes, over the 268435456 ddptrain reads for one sample (its "
              "other members hold 209715200)");
  }
}

}  // namespace
}  // namespace ddp::test
