// Tests: data.dataset = "webdataset" with shards served by nginx: two ranks train to the model.pt the same shards on
// disk give, every shard byte asked for with a Range request of a run of samples; a server that fails a shard stops
// every rank with one line naming the shard and the sample (data.on_bad_sample does not skip it); a missing index names
// its URL.
#include "data/dataset.h"
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// A generated image folder DIR/f (tests/python/image_folder_reference.py make's FOLDER_ARGS) packed by ddptrain
// --make-shards into DIR/www/s/{train,val}-NNNNNN.tar of about SHARD_MB; the number of train and val shards.
std::pair<int, int> make_served_shards(const TempDir& dir,
                                       const std::string& folder_args =
                                           "--classes 3 --train 10 --val 3 --seed 3 "
                                           "--min-side 28 --max-side 36 --learnable",
                                       const std::string& shard_mb = "0.004") {
  const CommandResult made = run_command(
      python() + " " + source_dir() + "/tests/python/image_folder_reference.py make " + dir / "f" + " " + folder_args);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  write_file(dir / "convert.toml",
             "[model]\nname = \"net\"\nnum_classes = 3\n[data]\ndataset = \"image_folder\"\n"
             "image_size = 28\ndir = \"" +
                 dir / "f" + "\"\n");
  const CommandResult r = run_command(ddptrain_path() + " " + dir / "convert.toml" + " --make-shards " + dir / "www/s" +
                                      " --shard-size " + shard_mb + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::pair<int, int> shards{0, 0};
  for (const auto& f : fs::directory_iterator(dir / "www/s"))
    if (f.path().extension() == ".tar")
      ++(f.path().filename().string().rfind("train-", 0) == 0 ? shards.first : shards.second);
  return shards;
}

// Why these tests cannot run here ("" when they can): libcurl, nginx, and PIL and numpy for the image folder.
std::string missing_for_http_shards() {
  if (!built_with_libcurl()) return "built without libcurl";
  if (!have_nginx()) return "nginx absent";
  if (!python_has_modules("PIL, numpy")) return python() + " lacks PIL or numpy";
  return "";
}

std::string pattern(const std::string& base, const std::string& split, int shards) {
  char last[16];
  std::snprintf(last, sizeof last, "%06d", shards - 1);
  return base + split + "-{000000.." + last + "}.tar";
}

std::string job_args(const TempDir& dir, const std::string& base, std::pair<int, int> shards,
                     const std::vector<std::string>& more) {
  write_file(dir / "job.toml", "");
  std::vector<std::string> keys = {"data.dataset=webdataset",
                                   "data.train_shards=" + pattern(base, "train", shards.first),
                                   "data.val_shards=" + pattern(base, "val", shards.second),
                                   "model.name=net",
                                   "model.num_classes=3",
                                   "data.image_size=28",
                                   "data.batch_size=4",
                                   "data.workers=2",
                                   "data.shuffle_buffer=6",
                                   "data.shards_in_flight=2",
                                   "optimizer.lr=0.05",
                                   "training.epochs=2",
                                   "metrics.progress=off",
                                   "dist.timeout_s=60.0"};
  keys.insert(keys.end(), more.begin(), more.end());
  std::string out = " " + dir / "job.toml";
  for (const std::string& k : keys) out += " " + shell_quote("--" + k);
  return out;
}

TEST(WebdatasetHttp, TwoRanksTrainOnShardsFromNginxAsOnTheSameShardsOnDisk) {
  if (const std::string why = missing_for_http_shards(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::pair<int, int> shards = make_served_shards(dir);
  ASSERT_GE(shards.first, 4);
  NginxServer nginx(dir / "www");
  for (const auto& [name, base] : {std::pair{"disk", dir / "www/s/"}, std::pair{"http", nginx.url() + "s/"}}) {
    const auto ranks = run_ranks(
        2, job_args(dir, base, shards, {"job.out_dir=" + dir / name, "data.class_names=" + dir / "www/s/classes.txt"}));
    for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
  }
  EXPECT_EQ(read_file(dir / "disk/model.pt"), read_file(dir / "http/model.pt"));
  // The converter's class names (the image folder's, in label order) kept as an image folder run keeps them.
  EXPECT_EQ(read_file(dir / "www/s/classes.txt"), "class_00\nclass_01\nclass_02\n");
  const nlohmann::json classes = nlohmann::json::parse(read_file(dir / "http/classes.json"));
  EXPECT_EQ(classes["classes"], nlohmann::json({"class_00", "class_01", "class_02"}));
  // Each rank read every index whole once, and each sample's bytes with a Range request.
  std::istringstream lines(nginx.requests());
  int indexes = 0, ranged = 0;
  for (std::string method, uri, status, sent, connection, range;
       lines >> method >> uri >> status >> sent >> connection && std::getline(lines, range);) {
    if (uri.size() > 7 && uri.substr(uri.size() - 7) == ".ddpidx") {
      EXPECT_EQ(status + range, "200 -") << uri;
      ++indexes;
    } else {
      EXPECT_EQ(status, "206") << uri;
      EXPECT_EQ(range.rfind(" bytes=", 0), 0u) << uri << range;
      ++ranged;
    }
  }
  EXPECT_EQ(indexes, 2 * (shards.first + shards.second)) << nginx.requests();
  // A Range request reads a run of a shard's samples (all of a shard this small): at most one a shard, rank and epoch,
  // and one more at each end of a rank's block.
  EXPECT_GT(ranged, 0);
  EXPECT_LE(ranged, 2 * 2 * (shards.first + 2) + 2 * (shards.second + 2)) << nginx.requests();
}

// Shards of several 2 MiB runs (noise PNGs of about 0.5 MB): each run read with one Range request, the next read
// ahead in the background, and the model the same as from disk.
TEST(WebdatasetHttp, LargeShardsAreReadARunAtATimeAheadOfTheLoaderAsOnDisk) {
  if (const std::string why = missing_for_http_shards(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::pair<int, int> shards =
      make_served_shards(dir, "--classes 3 --train 8 --val 2 --seed 4 --min-side 400 --max-side 440", "5");
  ASSERT_GE(shards.first, 2);
  NginxServer nginx(dir / "www");
  for (const auto& [name, base] : {std::pair{"disk", dir / "www/s/"}, std::pair{"http", nginx.url() + "s/"}}) {
    const CommandResult r =
        run_command(ddptrain_path() +
                    job_args(dir, base, shards, {"job.out_dir=" + dir / name, "data.shuffle_buffer=4"}) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
  }
  EXPECT_EQ(read_file(dir / "disk/model.pt"), read_file(dir / "http/model.pt"));
  // Every train shard's runs: Range requests of at most 2 MiB (or one sample), starting at several places.
  std::istringstream lines(nginx.requests());
  std::map<std::string, std::set<std::string>> starts;
  for (std::string method, uri, status, sent, connection, range;
       lines >> method >> uri >> status >> sent >> connection && std::getline(lines, range);) {
    if (uri.find("/s/train-") != 0 || uri.find(".ddpidx") != std::string::npos) continue;
    EXPECT_EQ(status, "206") << uri;
    EXPECT_LE(std::stoll(sent), (int64_t{2} << 20) + 600000) << uri << range;
    starts[uri].insert(range.substr(0, range.find('-')));
  }
  ASSERT_EQ(starts.size(), static_cast<size_t>(shards.first)) << nginx.requests();
  for (const auto& [uri, runs] : starts) EXPECT_GE(runs.size(), 2u) << uri << "\n" << nginx.requests();
}

TEST(WebdatasetHttp, AShardTheServerFailsStopsEveryRankNamingItAndAMissingIndexNamesItsUrl) {
  if (const std::string why = missing_for_http_shards(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::pair<int, int> shards = make_served_shards(dir);
  NginxServer nginx(dir / "www", "location = /s/train-000001.tar { return 500; }");
  const std::string base = nginx.url() + "s/";
  const auto start = std::chrono::steady_clock::now();
  const auto ranks = run_ranks(
      2,
      job_args(dir, base, shards, {"job.out_dir=" + dir / "out", "data.on_bad_sample=skip", "data.shard_retries=1"}));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& r : ranks) EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string named = rank_line_with(ranks, "error: shard " + base + "train-000001.tar, sample \"");
  EXPECT_NE(named.find(": HTTP 500 Internal Server Error (after 1 retry, data.shard_retries)"), std::string::npos)
      << ranks[0].output << ranks[1].output;
  EXPECT_LT(seconds, 45) << "a rank waited for the failed one";  // well under dist.timeout_s
  EXPECT_GE(nginx.count("/s/train-000001.tar", 500), 2) << nginx.requests();

  fs::remove(dir / "www/s/val-000000.tar.ddpidx");
  const Config cfg =
      parse_config("", "f.toml",
                   {"data.dataset=webdataset", "data.train_shards=" + pattern(base, "train", shards.first),
                    "data.val_shards=" + pattern(base, "val", shards.second), "model.name=net", "model.num_classes=3",
                    "data.image_size=28", "data.shard_retries=0"});
  const std::string why = error_of([&] { load_dataset(cfg.data, cfg.model, cfg.job.seed, [](const std::string&) {}); });
  EXPECT_EQ(why, base +
                     "val-000000.tar.ddpidx: HTTP 404 Not Found (data.val_shards: a shard's index SHARD.ddpidx is "
                     "read beside it; make it with ddptrain --index-shards and serve it with the shard)");
  // Class names that are not model.num_classes.
  write_file(dir / "two.txt", "a\nb\n");
  const Config with_names =
      parse_config("", "f.toml",
                   {"data.dataset=webdataset", "data.train_shards=" + dir / "www/s/train-000000.tar",
                    "data.val_shards=" + dir / "www/s/train-000000.tar", "model.name=net", "model.num_classes=3",
                    "data.image_size=28", "data.class_names=" + dir / "two.txt"});
  EXPECT_EQ(error_of([&] {
              load_dataset(with_names.data, with_names.model, with_names.job.seed, [](const std::string&) {});
            }),
            "data.class_names: " + dir / "two.txt" + " names 2 classes, model.num_classes = 3");
}

}  // namespace
}  // namespace ddp::test
