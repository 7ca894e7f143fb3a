// Tests: data.dataset = "webdataset" reads the samples and classes Python's webdataset reads from shards its
// writers (ShardWriter, TarWriter) wrote, each sample decoded and transformed as the same file of an image folder;
// ddptrain --index-shards; bad shards and indexes are one line naming the shard (and the sample's key); training on
// very unequal shards gives every rank the same steps (2 and 3 ranks), resumes bit for bit after kill -9 (1 and 2
// ranks, 2 loader threads) and sample-exact on another world; two ranks learn from shards as from the image folder.
#include "data/dataset.h"
#include "data/shard_index.h"
#include "data/shard_patterns.h"
#include "tests/report/metrics_fields.h"
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// ROOT/SPLIT's class folders written as shards OUT/SPLIT-NN.tar, the samples in the image folder's order (class
// folders sorted, each one's files sorted): SIZES "a,b,c" shards of those sizes by webdataset's TarWriter, or "maxN"
// by its ShardWriter(maxcount=N). A sample's key is CLASS/STEM, its image member the file's extension, its cls the
// class's index.
constexpr const char* kWriteShards = R"py(
import os, sys
import webdataset as wds
root, out, split, sizes = sys.argv[1:5]
classes = sorted(os.listdir(os.path.join(root, split)))
files = [(k, c, f) for k, c in enumerate(classes) for f in sorted(os.listdir(os.path.join(root, split, c)))]
def sample(k, c, f):
    stem, ext = os.path.splitext(f)
    with open(os.path.join(root, split, c, f), "rb") as fh:
        return {"__key__": "%s/%s" % (c, stem), ext[1:].lower(): fh.read(), "cls": str(k).encode()}
if sizes.startswith("max"):
    with wds.ShardWriter(os.path.join(out, split + "-%02d.tar"), maxcount=int(sizes[3:]), encoder=False,
                         verbose=0) as w:
        for k, c, f in files:
            w.write(sample(k, c, f))
else:
    it = iter(files)
    for s, n in enumerate(int(x) for x in sizes.split(",")):
        with wds.TarWriter(os.path.join(out, "%s-%02d.tar" % (split, s)), encoder=False) as w:
            for _ in range(n):
                w.write(sample(*next(it)))
    assert next(it, None) is None, "more files than the sizes hold"
)py";

// What webdataset reads from the shards of a pattern, in order: "key class" lines.
constexpr const char* kListShards = R"py(
import sys
import webdataset as wds
for key, cls in wds.WebDataset(sys.argv[1], shardshuffle=False, empty_check=False).to_tuple("__key__", "cls"):
    print(key, int(cls))
)py";

bool have_oracles() { return python_has_modules("webdataset, PIL, numpy"); }

// A generated image folder ROOT/{train,val}/class_NN/img_NNNN.png.
void make_image_folder(const std::string& root, const std::string& args) {
  const CommandResult r =
      run_command(python() + " " + source_dir() + "/tests/python/image_folder_reference.py make " + root + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

void write_shards(const std::string& root, const std::string& out, const std::string& split, const std::string& sizes) {
  fs::create_directories(out);
  const CommandResult r =
      run_command(python() + " -c " + shell_quote(kWriteShards) + " " + root + " " + out + " " + split + " " + sizes);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

CommandResult index_shards(const std::string& pattern) {
  return run_command(ddptrain_path() + " --index-shards " + shell_quote(pattern) + " 2>&1");
}

Config shard_config(const std::string& train, const std::string& val, const std::vector<std::string>& keys = {}) {
  std::vector<std::string> all = {"data.dataset=webdataset", "data.train_shards=" + train, "data.val_shards=" + val,
                                  "model.name=resnet18",     "model.num_classes=3",        "data.image_size=16"};
  all.insert(all.end(), keys.begin(), keys.end());
  return parse_config("", "f.toml", all);
}

Dataset load(const Config& cfg) {
  return load_dataset(cfg.data, cfg.model, cfg.job.seed, [](const std::string&) {});
}

// The error load() throws, or "" when it loads.
std::string load_error(const Config& cfg) {
  try {
    load(cfg);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(WebdatasetShards, SamplesAndClassesAreWebdatasetsEachReadAsTheImageFolderFile) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  make_image_folder(dir / "f", "--classes 3 --train 8 --val 3 --seed 2 --min-side 18 --max-side 30");
  write_shards(dir / "f", dir / "s", "train", "1,13,2,8");  // TarWriter, very unequal shards
  write_shards(dir / "f", dir / "s", "val", "max4");        // ShardWriter: 4, 4, 1
  const std::string train = dir / "s/train-{00..03}.tar", val = dir / "s/val-{00..02}.tar";
  const CommandResult indexed = index_shards(train + "::" + val);
  ASSERT_EQ(indexed.exit_code, 0) << indexed.output;
  EXPECT_NE(indexed.output.find("indexed 7 shard(s), 33 samples"), std::string::npos) << indexed.output;
  EXPECT_NE(indexed.output.find(dir / "s/train-01.tar.ddpidx: 13 samples"), std::string::npos) << indexed.output;

  const Config cfg = shard_config(train, val, {"data.augment=standard"});
  const Dataset ds = load(cfg);
  EXPECT_EQ(ds.train.shard_sizes, (std::vector<int64_t>{1, 13, 2, 8}));
  EXPECT_EQ(ds.test.shard_sizes, (std::vector<int64_t>{4, 4, 1}));
  for (const auto& [pattern, split] : {std::pair{train, &ds.train}, std::pair{val, &ds.test}}) {
    const CommandResult oracle = run_command(python() + " -c " + shell_quote(kListShards) + " " + shell_quote(pattern));
    ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
    std::string mine;
    int64_t i = 0;
    for (const std::string& shard : expand_shard_patterns(pattern)) {
      const ShardIndex index = read_shard_index(shard, -1);
      for (int64_t k = 0; k < index.size(); ++k, ++i)
        mine += std::string(index.key(k)) + " " + std::to_string(split->labels[i].item<int64_t>()) + "\n";
    }
    EXPECT_EQ(mine, oracle.output);
  }
  // Sample i of the shards is file i of the image folder: the same image, transformed with the same draws.
  const Config folder_cfg = parse_config("", "f.toml",
                                         {"data.dataset=image_folder", "data.dir=" + dir / "f", "model.name=resnet18",
                                          "data.image_size=16", "data.augment=standard"});
  const Dataset folder = load(folder_cfg);
  ASSERT_EQ(folder.train.size(), ds.train.size());
  ASSERT_EQ(folder.test.size(), ds.test.size());
  EXPECT_TRUE(torch::equal(folder.train.labels, ds.train.labels));
  for (const auto& [mine, theirs] : {std::pair{&ds.train, &folder.train}, std::pair{&ds.test, &folder.test}})
    for (int64_t i = 0; i < mine->size(); ++i) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(i);
      const SampleSource::Sample a = mine->source->read(i, seed), b = theirs->source->read(i, seed);
      ASSERT_TRUE(torch::equal(a.image, b.image)) << "sample " << i;
      EXPECT_EQ(a.index, i);
    }
  EXPECT_EQ(ds.train.transforms, folder.train.transforms);
}

TEST(WebdatasetShards, BadShardsAndIndexesAreOneLineNamingTheShardAndTheSample) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  make_image_folder(dir / "f", "--classes 3 --train 2 --val 1 --seed 3 --min-side 18 --max-side 20");
  write_shards(dir / "f", dir / "s", "train", "3,3");
  write_shards(dir / "f", dir / "s", "val", "3");
  const std::string train = dir / "s/train-{00..01}.tar", val = dir / "s/val-00.tar";
  // No index beside a shard.
  EXPECT_NE(load_error(shard_config(train, val))
                .find(dir / "s/train-00.tar.ddpidx: no index beside shard " + dir / "s/train-00.tar"),
            std::string::npos);
  ASSERT_EQ(index_shards(train + "::" + val).exit_code, 0);
  EXPECT_EQ(load_error(shard_config(train, val)), "");
  // A shard changed since it was indexed.
  const std::string second = dir / "s/train-01.tar", saved = read_file(second);
  write_file(second, saved + std::string(512, '\0'));
  EXPECT_NE(load_error(shard_config(train, val)).find("changed since it was indexed"), std::string::npos);
  write_file(second, saved);
  // An index that is not one.
  const std::string index_file = shard_index_path(second), index_bytes = read_file(index_file);
  write_file(index_file, "not an index at all, though long enough for a header");
  EXPECT_NE(load_error(shard_config(train, val)).find(index_file + ": not a ddptrain shard index"), std::string::npos);
  write_file(index_file, index_bytes.substr(0, index_bytes.size() - 3));
  EXPECT_NE(load_error(shard_config(train, val)).find(index_file + ": not a ddptrain shard index"), std::string::npos);
  {  // the first sample's length (after the 40 header bytes and its offset) 2^40: past the shard's end
    std::string long_first = index_bytes;
    for (int b = 0; b < 8; ++b) long_first[48 + b] = b == 5 ? '\x01' : '\0';
    write_file(index_file, long_first);
    const std::string error = load_error(shard_config(train, val));
    EXPECT_NE(error.find(index_file +
                         ": not a ddptrain shard index (sample 0's place 0+1099511627776 ends past the "
                         "shard's " +
                         std::to_string(saved.size()) + " bytes)"),
              std::string::npos)
        << error;
  }
  write_file(index_file, index_bytes);
  {  // A shard cut short after the index was read: the sample whose bytes are missing is named.
    const Dataset ds = load(shard_config(train, val));
    write_file(second, saved.substr(0, 1024));
    try {
      ds.train.source->read(5, 0);
      ADD_FAILURE() << "no error for a shard cut short";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("shard " + second + ", sample \"", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("the file ends there"), std::string::npos) << e.what();
    }
    write_file(second, saved);
  }
  // A shard rewritten with other keys of the same length (its size unchanged): the sample read is not the one its
  // index names.
  {
    std::string renamed = saved;
    // "img_1000": the same bytes in another order, so that each tar header's checksum still holds.
    for (size_t at = renamed.find("img_0001"); at != std::string::npos; at = renamed.find("img_0001", at + 1))
      renamed.replace(at, 8, "img_1000");
    ASSERT_NE(renamed, saved);
    write_file(second, renamed);
    const Dataset ds = load(shard_config(train, val));
    try {
      ds.train.source->read(3, 0);
      ADD_FAILURE() << "no error for a shard that differs from its index";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("shard " + second + ": its index says sample \"class_01/img_0001\""),
                std::string::npos)
          << e.what();
    }
    // The same shard with its first sample's header blocks zeroed (its size unchanged): what lies at the place is no
    // tar member, and the error names the sample and the place.
    write_file(second, std::string(1024, '\0') + saved.substr(1024));
    try {
      load(shard_config(train, val)).train.source->read(3, 0);
      ADD_FAILURE() << "no error for a sample whose bytes are no tar member";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("shard " + second +
                                                ", sample \"class_01/img_0001\": unreadable at byte 0, "
                                                "where its index places it: ",
                                            0),
                0u)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("(index it again with ddptrain --index-shards)"), std::string::npos);
    }
    write_file(second, saved);
  }
  // Classes: missing, not an integer, out of range, and a sample without an image: with data.on_bad_sample =
  // "error" the first one the index shows stops the load (the image when it is read), naming it; with "skip" each
  // such sample is replaced by the next readable one when read, and counted.
  const std::string odd = dir / "s/odd.tar", nocls = dir / "s/nocls.tar", noimage = dir / "s/noimage.tar";
  const CommandResult made = run_command(python() + " -c " + shell_quote(R"py(
import sys, webdataset as wds
png = open(sys.argv[4], "rb").read()
with wds.TarWriter(sys.argv[1], encoder=False) as w:
    w.write({"__key__": "good", "png": png, "cls": b" 1\n"})
    w.write({"__key__": "big", "png": png, "cls": b"7"})
    w.write({"__key__": "word", "png": png, "cls": b"one"})
with wds.TarWriter(sys.argv[2], encoder=False) as w:
    w.write({"__key__": "nocls", "png": png})
with wds.TarWriter(sys.argv[3], encoder=False) as w:
    w.write({"__key__": "noimage", "txt": b"x", "cls": b"2"})
)py") + " " + odd + " " + nocls + " " + noimage +
                                         " " + dir / "f/val/class_00/img_0000.png");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ASSERT_EQ(index_shards(odd + "::" + nocls + "::" + noimage).exit_code, 0);
  const std::string at = "shard " + odd + ", sample ";
  EXPECT_EQ(load_error(shard_config(odd, val)), at + "\"big\": class 7 is outside [0, 3) (model.num_classes = 3)");
  EXPECT_EQ(load_error(shard_config(odd, val, {"model.num_classes=8"})),
            at + "\"word\": its cls member is not a decimal integer");
  EXPECT_EQ(load_error(shard_config(nocls, val)),
            "shard " + nocls +
                ", sample \"nocls\": no cls member (a sample's class is its .cls member, a decimal "
                "integer)");
  try {
    load(shard_config(noimage, val)).train.source->read(0, 0);
    ADD_FAILURE() << "no error for a sample without an image";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "shard " + noimage + ", sample \"noimage\": no jpg, jpeg or png member (the images ddptrain decodes)");
  }
  const Dataset skipping = load(shard_config(odd, val, {"data.on_bad_sample=skip"}));
  EXPECT_EQ(skipping.train.labels[0].item<int64_t>(), 1);
  for (int64_t i : {1, 2}) EXPECT_EQ(skipping.train.source->read(i, 0).index, 0) << i;  // wrapping to "good"
  EXPECT_EQ(skipping.train.source->bad_samples(), 2 + 1);
  const Dataset wider = load(shard_config(odd, val, {"model.num_classes=8", "data.on_bad_sample=skip"}));
  EXPECT_EQ(wider.train.source->read(1, 0).index, 1);  // class 7 of 8
  EXPECT_EQ(wider.train.labels[1].item<int64_t>(), 7);
  // A truncated shard: --index-shards says which, exit 1.
  write_file(dir / "s/cut.tar", saved.substr(0, 1500));
  const CommandResult cut = index_shards(dir / "s/cut.tar");
  EXPECT_EQ(cut.exit_code, 1) << cut.output;
  EXPECT_NE(cut.output.find("error: shard " + dir / "s/cut.tar: "), std::string::npos) << cut.output;
  EXPECT_FALSE(fs::exists(dir / "s/cut.tar.ddpidx"));
  // A compressed shard: indexed (a sample's place is in the decompressed stream), read front to back.
  ASSERT_EQ(run_command("gzip -k " + second).exit_code, 0);
  ASSERT_EQ(index_shards(second + ".gz").exit_code, 0);
  EXPECT_EQ(load_error(shard_config(second + ".gz", val)), "");
  // A pipe: command with no word naming a .tar (where its index is read from), and a pattern that does not parse:
  // config errors naming the key.
  EXPECT_NE(load_error(shard_config("pipe:cat /dev/zero", val))
                .find("data.train_shards: shard pipe:cat /dev/zero: no word of the command names a .tar shard"),
            std::string::npos);
  EXPECT_NE(load_error(shard_config(train, "x-{0..3")).find("data.val_shards: unbalanced braces"), std::string::npos);
}

// Checks the shards of PATTERN against the dataset they were made from, with webdataset and PIL: an image folder's
// split ROOT (every file's bytes, in ImageFolder's order) or CIFAR-10's binary files in ROOT (each record's pixels
// from the PNG, "train" or "val"); prints "ok N".
constexpr const char* kCheckMadeShards = R"py(
import io, os, sys
import numpy as np
import webdataset as wds
from PIL import Image
pattern, kind, root, split = sys.argv[1:5]
samples = list(wds.WebDataset(pattern, shardshuffle=False, empty_check=False))
if kind == "folder":
    classes = sorted(os.listdir(root))
    files = [(k, os.path.join(root, c, f)) for k, c in enumerate(classes) for f in sorted(os.listdir(os.path.join(root, c)))]
    assert len(files) == len(samples), (len(files), len(samples))
    for i, ((k, path), s) in enumerate(zip(files, samples)):
        stem = os.path.splitext(os.path.basename(path))[0]
        assert s["__key__"] == "%s/%08d_%s" % (classes[k], i, stem), s["__key__"]
        assert int(s["cls"]) == k and s["png"] == open(path, "rb").read(), s["__key__"]
else:
    names = ["data_batch_%d.bin" % b for b in range(1, 6)] if split == "train" else ["test_batch.bin"]
    records = np.concatenate([np.fromfile(os.path.join(root, n), np.uint8).reshape(-1, 3073) for n in names])
    assert len(records) == len(samples), (len(records), len(samples))
    for i, (r, s) in enumerate(zip(records, samples)):
        assert s["__key__"] == "%d/%08d" % (r[0], i) and int(s["cls"]) == r[0], s["__key__"]
        pixels = np.asarray(Image.open(io.BytesIO(s["png"])).convert("RGB"))
        assert (pixels == r[1:].reshape(3, 32, 32).transpose(1, 2, 0)).all(), s["__key__"]
print("ok", len(samples))
)py";

TEST(WebdatasetShards, MadeShardsAreReadByWebdatasetAndDdptrainAndTheSameEveryTime) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  make_image_folder(dir / "f", "--classes 3 --train 6 --val 2 --seed 5 --min-side 18 --max-side 30");
  write_tiny_cifar10(dir / "c", 3, 7, 2);
  write_file(dir / "folder.toml",
             "[data]\ndataset = \"image_folder\"\ndir = \"" + dir / "f" + "\"\n[model]\nname = \"resnet18\"\n");
  write_file(dir / "cifar.toml",
             "[data]\ndataset = \"cifar10\"\ndir = \"" + dir / "c" + "\"\n[model]\nname = \"resnet18\"\n");
  std::map<std::string, std::string> output;
  for (const char* name : {"folder", "cifar"})
    for (const char* out : {"a", "b"}) {
      const CommandResult made = run_command(ddptrain_path() + " " + dir / name + ".toml --make-shards " + dir / name +
                                             out + " --shard-size 0.004 2>&1");
      ASSERT_EQ(made.exit_code, 0) << made.output;
      output[std::string(name) + out] = made.output;
    }
  for (const std::string name : {"folder", "cifar"}) {
    for (const std::string split : {"train", "val"}) {
      const std::string pattern = made_shard_pattern(output[name + "a"], split);
      ASSERT_FALSE(pattern.empty()) << output[name + "a"];
      const std::vector<std::string> shards = expand_shard_patterns(pattern);
      EXPECT_GT(shards.size(), 1u) << pattern;  // about 4 KB each
      const std::string root = name == "folder" ? dir / "f/" + split : dir / "c";
      const CommandResult checked = run_command(python() + " -c " + shell_quote(kCheckMadeShards) + " " +
                                                shell_quote(pattern) + " " + name + " " + root + " " + split);
      EXPECT_EQ(checked.exit_code, 0) << checked.output;
      // The same dataset gives the same bytes: every shard and its index.
      for (const std::string& shard : shards) {
        const std::string again = dir / name + "b" + shard.substr((dir / name + "a").size());
        EXPECT_EQ(read_file(shard), read_file(again)) << shard;
        EXPECT_EQ(read_file(shard_index_path(shard)), read_file(shard_index_path(again))) << shard;
      }
    }
  }
  // ddptrain reads the image folder's shards as the folder: the same labels, images and draws.
  const Config cfg = shard_config(made_shard_pattern(output["foldera"], "train"),
                                  made_shard_pattern(output["foldera"], "val"), {"data.augment=standard"});
  const Dataset ds = load(cfg);
  const Dataset folder = load(parse_config("", "f.toml",
                                           {"data.dataset=image_folder", "data.dir=" + dir / "f", "model.name=resnet18",
                                            "data.image_size=16", "data.augment=standard"}));
  ASSERT_TRUE(torch::equal(ds.train.labels, folder.train.labels));
  for (int64_t i = 0; i < ds.train.size(); ++i)
    EXPECT_TRUE(torch::equal(ds.train.source->read(i, 7).image, folder.train.source->read(i, 7).image)) << i;
  // What it does not pack: a dataset kind without files, a file that is not a JPEG or PNG.
  const CommandResult synthetic = run_command(ddptrain_path() + " " +
                                              dir /
                                                  "cifar.toml --data.dataset=synthetic "
                                                  "--make-shards " +
                                              dir / "x 2>&1");
  EXPECT_EQ(synthetic.exit_code, 2) << synthetic.output;
  EXPECT_NE(synthetic.output.find("--make-shards packs data.dataset = \"image_folder\" or \"cifar10\""),
            std::string::npos)
      << synthetic.output;
  write_file(dir / "f/train/class_01/extra.bmp", "BM");
  const CommandResult bmp = run_command(ddptrain_path() + " " + dir / "folder.toml --make-shards " + dir / "x 2>&1");
  EXPECT_EQ(bmp.exit_code, 1) << bmp.output;
  EXPECT_NE(bmp.output.find("error: " + dir / "f/train/class_01/extra.bmp: shards hold JPEG and PNG images"),
            std::string::npos)
      << bmp.output;
}

// A generated 3-class folder as shards of very unequal sizes (train 1, 20, 2, 13; val 6), indexed; the keys of a job
// on them (Net on 28x28 crops, batches of 4, two loader threads, a checkpoint every 2 steps, sample ids logged).
std::vector<std::string> unequal_shard_job(const TempDir& dir) {
  make_image_folder(dir / "f", "--classes 3 --train 12 --val 2 --seed 4 --min-side 28 --max-side 36 --learnable");
  write_shards(dir / "f", dir / "s", "train", "1,20,2,13");
  write_shards(dir / "f", dir / "s", "val", "6");
  const std::string train = dir / "s/train-{00..03}.tar", val = dir / "s/val-00.tar";
  const CommandResult indexed = index_shards(train + "::" + val);
  EXPECT_EQ(indexed.exit_code, 0) << indexed.output;
  return {"data.dataset=webdataset",
          "data.train_shards=" + train,
          "data.val_shards=" + val,
          "model.name=net",
          "model.num_classes=3",
          "data.image_size=28",
          "data.batch_size=4",
          "data.workers=2",
          "data.shuffle_buffer=8",
          "data.shards_in_flight=2",
          "job.seed=9",
          "optimizer.lr=0.05",
          "training.epochs=2",
          "checkpoint.every_steps=2",
          "checkpoint.keep_last=100",
          "metrics.log_every_steps=1",
          "metrics.progress=plain",
          "metrics.sample_ids=true",
          "dist.timeout_s=30.0"};
}

// An empty config file in `dir` and `keys` as overrides: the command line's arguments.
std::string job_args(const TempDir& dir, const std::vector<std::string>& keys) {
  write_file(dir / "job.toml", "");
  std::string out = " " + dir / "job.toml";
  for (const std::string& k : keys) out += " " + shell_quote("--" + k);
  return out;
}

// (epoch, sample) counts of out/samples/rank-*.jsonl lines of world `world` whose step lies in [first, last].
std::map<int64_t, std::map<int64_t, int64_t>> samples_seen(const std::string& out, int64_t world, int64_t first,
                                                           int64_t last, std::map<int64_t, int64_t>* steps_per_rank) {
  std::map<int64_t, std::map<int64_t, int64_t>> seen;
  const std::regex line_re(R"(\{"step":(\d+),"epoch":(\d+),"rank":(\d+),"world_size":(\d+),"samples":\[([0-9,]*)\]\})");
  for (const auto& file : fs::directory_iterator(out + "/samples"))
    for (const std::string& line : read_lines(file.path().string())) {
      std::smatch m;
      if (!std::regex_match(line, m, line_re)) {
        ADD_FAILURE() << "unreadable sample line: " << line;
        continue;
      }
      const int64_t step = std::stoll(m[1]);
      if (std::stoll(m[4]) != world || step < first || step > last) continue;
      if (steps_per_rank) ++(*steps_per_rank)[std::stoll(m[3])];
      std::stringstream ids(m[5].str());
      for (std::string id; std::getline(ids, id, ',');) ++seen[std::stoll(m[2])][std::stoll(id)];
    }
  return seen;
}

TEST(WebdatasetTraining, UnequalShardsGiveEveryRankTheSameStepsAndAnEpochGoesOnExactlyOnAnotherWorld) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  const std::vector<std::string> job = unequal_shard_job(dir);
  // 36 samples: 3 ranks take 12 each (3 steps an epoch), 2 ranks 18 (5 steps, the last of 2 samples). A rank short
  // of a batch would leave the others waiting in the all-reduce until dist.timeout_s.
  for (int world : {3, 2}) {
    const std::string out = dir / ("w" + std::to_string(world));
    const auto ranks = run_ranks(world, job_args(dir, job) + " --job.out_dir=" + out);
    for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
    std::map<int64_t, int64_t> steps;
    const auto seen = samples_seen(out, world, 1, 1000, &steps);
    ASSERT_EQ(steps.size(), static_cast<size_t>(world));
    for (const auto& [rank, n] : steps) EXPECT_EQ(n, world == 3 ? 6 : 10) << "rank " << rank;
    for (const auto& [epoch, counts] : seen) {
      EXPECT_EQ(counts.size(), 36u) << "epoch " << epoch;  // every sample, each once (36 divides evenly)
      for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << "sample " << id << " of epoch " << epoch;
    }
  }
  // The first epoch of the 2-rank run stopped after its 2nd step (the checkpoint of step 2) and goes on with 3 ranks:
  // the rest of its global order, 20 samples, over 3 ranks (7 each, one repeated as padding).
  const std::string resumed = dir / "resumed";
  const auto ranks = run_ranks(3, job_args(dir, job) + " --job.out_dir=" + resumed +
                                      " --checkpoint.resume=" + dir / "w2/checkpoints/step-00000002.pt");
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("continues from sample 16 of the global order"), std::string::npos) << ranks[0].output;
  auto before = samples_seen(dir / "w2", 2, 1, 2, nullptr)[1];  // epochs count from 1 there
  const auto after = samples_seen(resumed, 3, 3, 1000, nullptr);
  int64_t repeats = 0;
  for (const auto& [id, n] : after.at(1)) before[id] += n;
  for (const auto& [id, n] : before) repeats += n - 1;
  EXPECT_EQ(before.size(), 36u);
  EXPECT_EQ(repeats, 1);
  EXPECT_EQ(after.at(2).size(), 36u);  // the next epoch: 3 ranks' own order, every sample once
}

TEST(WebdatasetTraining, ARunKilledMidEpochResumesBitIdentical) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  const std::vector<std::string> job = unequal_shard_job(dir);
  const std::string ddprun = binary_dir() + "/ddprun";
  for (int world : {1, 2}) {
    const std::string common = " --standalone --nproc-per-node=" + std::to_string(world) + " --grace-period=2 ";
    const std::string full = dir / ("full" + std::to_string(world)), killed = dir / ("killed" + std::to_string(world));
    const CommandResult whole =
        run_command(ddprun + common + ddptrain_path() + job_args(dir, job) + " --job.out_dir=" + full);
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    // Killed after step 3 is logged (a checkpoint at step 2, mid-epoch): restarted, resumed from it.
    const CommandResult r = run_ddprun_killing_a_worker(
        common + "--max-restarts=1 " + ddptrain_path() + job_args(dir, job) + " --job.out_dir=" + killed, killed, 3);
    const std::string log = read_file(killed + ".log");
    EXPECT_NE(r.output.find("rc 0"), std::string::npos) << r.output << log;
    EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
    EXPECT_EQ(read_file(full + "/model.pt"), read_file(killed + "/model.pt")) << world << " rank(s)";
  }
}

// Shards read front to back, from a pipe: command's output or compressed (gzip, xz; from disk or HTTP), and shards read
// over HTTP a run of samples at a time, give the batches and the model the same shards read at each sample's place give
// (2 ranks, 2 loader threads, a shuffle buffer over 2 shards in flight); a command that fails stops every rank naming
// it.
TEST(WebdatasetTraining, PipeCommandsAndCompressedShardsTrainAsTheShardsOnDisk) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  std::vector<std::string> job = unequal_shard_job(dir);
  job.push_back("training.epochs=1");
  ASSERT_EQ(run_command("cd " + dir / "s" +
                        " && for f in train-0[01].tar; do gzip -k $f; done && xz -k train-02.tar "
                        "train-03.tar val-00.tar")
                .exit_code,
            0);
  const std::string s = dir / "s/";
  const CommandResult indexed =
      index_shards(s + "train-{00..01}.tar.gz::" + s + "train-{02..03}.tar.xz::" + s + "val-00.tar.xz");
  ASSERT_EQ(indexed.exit_code, 0) << indexed.output;
  const auto run = [&](const std::string& name, const std::string& train, const std::string& val,
                       const std::vector<std::string>& more = {}) {
    std::vector<std::string> keys = job;
    keys.insert(keys.end(), {"data.train_shards=" + train, "data.val_shards=" + val, "job.out_dir=" + dir / name});
    keys.insert(keys.end(), more.begin(), more.end());
    return run_ranks(2, job_args(dir, keys));
  };
  std::vector<std::tuple<std::string, std::string, std::string>> sources = {
      {"disk", s + "train-{00..03}.tar", s + "val-00.tar"},
      {"pipe", "pipe:cat " + s + "train-{00..03}.tar", "pipe:cat " + s + "val-00.tar"},
      {"compressed", s + "train-{00..01}.tar.gz::pipe:cat " + s + "train-{02..03}.tar.xz",
       "pipe:cat " + s + "val-00.tar.xz"}};
  // Over HTTP, runs of samples (a whole shard here) with one Range request each, kept until asked for.
  std::unique_ptr<NginxServer> nginx;
  if (have_nginx() && built_with_libcurl()) {
    nginx = std::make_unique<NginxServer>(dir.path());
    sources.emplace_back("http", nginx->url() + "s/train-{00..03}.tar", nginx->url() + "s/val-00.tar");
    // Compressed shards over HTTP: each body streamed front to back, decompressed as it comes.
    sources.emplace_back("http-compressed",
                         nginx->url() + "s/train-{00..01}.tar.gz::" + nginx->url() + "s/train-{02..03}.tar.xz",
                         nginx->url() + "s/val-00.tar.xz");
  }
  for (const auto& [name, train, val] : sources) {
    for (const auto& r : run(name, train, val)) ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_EQ(read_file(dir / "disk/model.pt"), read_file(dir / name + "/model.pt")) << name;
  }
  // Shard 01 (20 samples) from a command that writes 3000 bytes of it and exits 3, its index whole.
  write_file(dir / "cut.sh", "case \"$1\" in *.ddpidx) cat \"$1\" ;; *) head -c 3000 \"$1\"; exit 3 ;; esac\n");
  const std::string failing = "pipe:sh " + dir / "cut.sh" + " " + s + "train-01.tar";
  const auto ranks = run("failing", s + "train-00.tar::" + failing + "::" + s + "train-{02..03}.tar", s + "val-00.tar",
                         {"data.shard_retries=1", "data.on_bad_sample=skip"});
  for (const auto& r : ranks) EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string named = rank_line_with(ranks, "error: shard " + failing + ", sample \"");
  EXPECT_NE(named.find("(the command exited with status 3) (after 1 retry, data.shard_retries)"), std::string::npos)
      << ranks[0].output << ranks[1].output;
}

// Two ranks on shards of a learnable folder, and on the folder itself: validation accuracies within 1 point (128
// images: one image is 0.78 points, so the two may differ by one image, no more). Each class has its own colour and a
// bar that crops and flips keep; 16 epochs of a cosine schedule solve it on any machine's kernels
// (ImageFolder.LearnableFolderReaches95PercentValidationAccuracy).
TEST(WebdatasetAccuracy, TwoRanksOnShardsLearnAsOnTheImageFolder) {
  if (!have_oracles()) GTEST_SKIP() << python() << " lacks webdataset, PIL or numpy";
  TempDir dir;
  make_image_folder(dir / "f", "--learnable --classes 4 --train 32 --val 32 --seed 6 --min-side 28 --max-side 44");
  write_shards(dir / "f", dir / "s", "train", "max10");
  write_shards(dir / "f", dir / "s", "val", "max16");
  const std::string train = dir / "s/train-{00..12}.tar", val = dir / "s/val-{00..07}.tar";
  ASSERT_EQ(index_shards(train + "::" + val).exit_code, 0);
  const std::string common =
      job_args(dir, {"model.name=resnet18", "model.num_classes=4", "data.image_size=32", "data.batch_size=8",
                     "data.workers=2", "optimizer.lr=0.05", "optimizer.momentum=0.9", "training.epochs=16",
                     "lr_scheduler.decay=cosine", "training.eval_every_epochs=0", "metrics.progress=off"});
  std::map<std::string, double> accuracy;
  for (const auto& [name, data] :
       {std::pair{"folder", std::vector<std::string>{"data.dataset=image_folder", "data.dir=" + dir / "f"}},
        std::pair{"shards", std::vector<std::string>{"data.dataset=webdataset", "data.train_shards=" + train,
                                                     "data.val_shards=" + val, "data.shuffle_buffer=64"}}}) {
    std::string args = common;
    for (const std::string& k : data) args += " " + shell_quote("--" + k);
    const auto ranks = run_ranks(2, args + " --job.out_dir=" + dir / name);
    for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
    accuracy[name] = last_eval_value(dir / name + "/metrics.jsonl", "accuracy");
    std::cout << "[ measured ] " << name << ": validation accuracy " << accuracy[name] << "\n";
  }
  EXPECT_GE(accuracy["folder"], 0.95);
  EXPECT_NEAR(accuracy["shards"], accuracy["folder"], 0.01 + 1e-9);
}

}  // namespace
}  // namespace ddp::test
