// Tests: DistributedSampler against PyTorch's own index lists (tests/fixtures/sampler_cases.json) and its batch
// algebra.
#include "data/distributed_sampler.h"
#include "data/epoch_position.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {
namespace {

// A minimal JSON reader: objects, arrays, integers, strings without escapes, true/false/null.
struct Json {
  enum class Kind { Null, Bool, Int, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  const Json& operator[](const std::string& key) const {
    auto it = fields.find(key);
    if (kind != Kind::Object || it == fields.end()) throw std::runtime_error("JSON: missing key " + key);
    return it->second;
  }
  std::vector<int64_t> ints() const {
    std::vector<int64_t> out;
    for (const Json& v : items) {
      if (v.kind != Kind::Int) throw std::runtime_error("JSON: expected an integer array");
      out.push_back(v.integer);
    }
    return out;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse_document() {
    Json v = value();
    skip_space();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool eat_word(const std::string& w) {
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  std::string string_literal() {
    expect('"');
    size_t end = s_.find('"', pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(pos_, end - pos_);
    if (out.find('\\') != std::string::npos) fail("escapes are not supported");
    pos_ = end + 1;
    return out;
  }
  Json value() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++pos_;
      if (eat('}')) return v;
      do {
        std::string key = string_literal();
        expect(':');
        v.fields[key] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Kind::Array;
      ++pos_;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::String;
      v.text = string_literal();
    } else if (eat_word("true") || eat_word("false")) {
      v.kind = Json::Kind::Bool;
      v.boolean = c == 't';
    } else if (eat_word("null")) {
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      size_t used = 0;
      v.kind = Json::Kind::Int;
      v.integer = std::stoll(s_.substr(pos_, 24), &used);
      pos_ += used;
      if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) fail("non-integer number");
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

std::string fixture_path() { return test::source_dir() + "/tests/fixtures/sampler_cases.json"; }

const Json& fixture() {
  static const std::unique_ptr<Json> doc = [] {
    const std::string text = test::read_file(fixture_path());
    return std::make_unique<Json>(JsonParser(text).parse_document());
  }();
  return *doc;
}

DistributedSampler sampler_for(const Json& c, int64_t rank) {
  DistributedSampler s(c["n"].integer, c["world"].integer, rank, c["shuffle"].boolean,
                       static_cast<uint64_t>(c["seed"].integer), c["drop_last"].boolean);
  s.set_epoch(c["epoch"].integer);
  return s;
}

std::string describe(const Json& c) {
  return "n=" + std::to_string(c["n"].integer) + " world=" + std::to_string(c["world"].integer) +
         " shuffle=" + std::to_string(c["shuffle"].boolean) + " drop_last=" + std::to_string(c["drop_last"].boolean) +
         " epoch=" + std::to_string(c["epoch"].integer) + " seed=" + std::to_string(c["seed"].integer);
}

TEST(DistributedSamplerFixture, FileExistsAndIsNonEmpty) {
  const std::string text = test::read_file(fixture_path());
  ASSERT_GT(text.size(), 1000u) << fixture_path();
  EXPECT_GE(fixture()["cases"].items.size(), 448u);  // 7 sizes x 4 worlds x shuffle x drop_last x 2 epochs x 2 seeds
  EXPECT_GE(fixture()["large_cases"].items.size(), 1u);
}

TEST(DistributedSamplerFixture, EveryRankMatchesPyTorch) {
  for (const Json& c : fixture()["cases"].items) {
    SCOPED_TRACE(describe(c));
    const int64_t world = c["world"].integer;
    ASSERT_EQ(static_cast<int64_t>(c["ranks"].items.size()), world);
    for (int64_t r = 0; r < world; ++r) {
      DistributedSampler s = sampler_for(c, r);
      EXPECT_EQ(s.num_samples(), c["num_samples"].integer);
      EXPECT_EQ(s.total_size(), c["total_size"].integer);
      const std::vector<int64_t> mine = s.indices();
      EXPECT_EQ(mine, c["ranks"].items[r].ints()) << "rank " << r;
      // indices() is global_indices() strided from the rank.
      const std::vector<int64_t> global = s.global_indices();
      ASSERT_EQ(static_cast<int64_t>(global.size()), s.total_size());
      for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], global[r + static_cast<int64_t>(i) * world]);
    }
  }
}

TEST(DistributedSamplerFixture, LargeCasesMatchPyTorch) {
  for (const Json& c : fixture()["large_cases"].items) {
    SCOPED_TRACE(describe(c));
    for (int64_t r = 0; r < c["world"].integer; ++r) {
      const Json& expected = c["ranks"].items[r];
      DistributedSampler s = sampler_for(c, r);
      const std::vector<int64_t> mine = s.indices();
      EXPECT_EQ(s.num_samples(), c["num_samples"].integer);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), expected["length"].integer);
      const std::vector<int64_t> first = expected["first"].ints();
      ASSERT_GE(mine.size(), first.size());
      EXPECT_EQ(std::vector<int64_t>(mine.begin(), mine.begin() + first.size()), first) << "rank " << r;
      EXPECT_EQ(std::accumulate(mine.begin(), mine.end(), int64_t{0}), expected["sum"].integer) << "rank " << r;
    }
  }
}

// The DistributedSampler walk-through of a 2-GPU blog experiment: cases 2-7 use the default sampler (shuffle, seed 0)
// on 8, 6, 5 and 10 samples, epochs 0 and 1; case 1 has no sampler, i.e. one unshuffled rank. The generator checks the
// printed values.
TEST(DistributedSamplerFixture, CoversTheBlogExperimentCases) {
  auto has = [](int64_t n, int64_t world, bool shuffle, int64_t epoch) {
    for (const Json& c : fixture()["cases"].items)
      if (c["n"].integer == n && c["world"].integer == world && c["shuffle"].boolean == shuffle &&
          !c["drop_last"].boolean && c["epoch"].integer == epoch && c["seed"].integer == 0)
        return true;
    return false;
  };
  EXPECT_TRUE(has(8, 1, false, 0));
  for (int64_t n : {8, 6, 5, 10})
    for (int64_t epoch : {0, 1}) EXPECT_TRUE(has(n, 2, true, epoch)) << n << " " << epoch;
}

TEST(DistributedSamplerFixture, GeneratorReproducesFixtureByteForByte) {
  const std::string py = test::python();
  if (!test::python_has_torch())
    GTEST_SKIP() << py << " does not have torch, so the fixture cannot be regenerated here";
  test::TempDir dir;
  const std::string out = dir / "sampler_cases.json";
  const auto r = test::run_command(test::shell_quote(py) + " " +
                                   test::shell_quote(test::source_dir() + "/tests/fixtures/gen_sampler_fixture.py") +
                                   " " + test::shell_quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::read_file(out) == test::read_file(fixture_path()))
      << "regenerated sampler fixture differs from the committed one (torch version changed?)";
}

TEST(DistributedSampler, RejectsRanksOutsideTheWorldLikePython) {
  EXPECT_THROW(DistributedSampler(10, 2, 2, true, 0, false), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 2, -1, true, 0, false), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 0, 0, true, 0, false), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 2, 0, true, 0, false, 0), std::invalid_argument);
}

TEST(DistributedSampler, EvalShardPartitionsEverySampleExactlyOnce) {
  for (int64_t n : {0, 1, 5, 10, 17, 1001})
    for (int64_t world = 1; world <= 5; ++world) {
      std::vector<int64_t> seen(n, 0);
      for (int64_t r = 0; r < world; ++r) {
        std::vector<int64_t> shard = eval_shard(n, world, r);
        EXPECT_TRUE(std::is_sorted(shard.begin(), shard.end()));
        // Shard sizes differ by at most one (no padding, unlike the training sampler).
        EXPECT_LE(static_cast<int64_t>(shard.size()), (n + world - 1) / world);
        EXPECT_GE(static_cast<int64_t>(shard.size()), n / world);
        for (int64_t i : shard) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, n);
          ++seen[i];
        }
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n) << "n=" << n << " world=" << world;
    }
}

std::vector<int64_t> kth_batch(const std::vector<int64_t>& indices, int64_t k, int64_t b) {
  const int64_t lo = std::min<int64_t>(k * b, indices.size()), hi = std::min<int64_t>((k + 1) * b, indices.size());
  return {indices.begin() + lo, indices.begin() + hi};
}

// The ranks' k-th batches (batch b) together are positions [k*b*W, (k+1)*b*W) of the padded global order,
// because rank r takes positions r, r + W, ...: any N, padding included, as multisets.
TEST(DistributedSampler, RanksKthBatchesAreAContiguousBlockOfTheGlobalOrder) {
  for (int64_t n : {5, 17, 64, 1000})
    for (int64_t world = 1; world <= 4; ++world)
      for (bool drop_last : {false, true})
        for (int64_t b : {1, 3, 8}) {
          std::vector<DistributedSampler> ranks;
          for (int64_t r = 0; r < world; ++r) ranks.emplace_back(n, world, r, true, 42, drop_last);
          for (auto& s : ranks) s.set_epoch(2);
          const std::vector<int64_t> global = ranks[0].global_indices();
          for (int64_t k = 0; k * b < ranks[0].num_samples(); ++k) {
            std::multiset<int64_t> from_ranks;
            for (auto& s : ranks) {
              const auto batch = kth_batch(s.indices(), k, b);
              from_ranks.insert(batch.begin(), batch.end());
            }
            const auto block = kth_batch(global, k, b * world);
            EXPECT_EQ(from_ranks, std::multiset<int64_t>(block.begin(), block.end()))
                << "n=" << n << " world=" << world << " b=" << b << " k=" << k;
          }
        }
}

// An epoch resumed at position `offset` of its order on another world: every rank trains as many batches (a rank with
// one more would take a step, and a collective, that the others do not); the ranks' k-th batches together are the
// order's next block from `offset` on, as in a whole epoch. Without drop_last each sample of the rest once, padded
// from the order's start (fewer than world samples) only where the last global batch would leave a rank without a
// sample; with drop_last the rest less fewer than world of its last samples, as many on every rank. At offset 0 it
// is indices().
TEST(DistributedSampler, AnEpochResumedAtAnyPositionGivesEveryRankAsManyBatches) {
  for (int64_t n : {5, 17, 64, 1000})
    for (int64_t world = 1; world <= 4; ++world)
      for (bool drop_last : {false, true})
        for (int64_t b : {1, 3, 8})
          for (int64_t offset : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, int64_t{7}, n - 1, n}) {
            if (offset > n) continue;
            SCOPED_TRACE("n=" + std::to_string(n) + " world=" + std::to_string(world) + " drop_last=" +
                         std::to_string(drop_last) + " b=" + std::to_string(b) + " offset=" + std::to_string(offset));
            DistributedSampler one(n, 1, 0, true, 42, false);
            one.set_epoch(2);
            const std::vector<int64_t> order = one.indices();  // the epoch's order, unpadded
            std::vector<std::vector<int64_t>> ranks;
            int64_t taken = 0;
            for (int64_t r = 0; r < world; ++r) {
              DistributedSampler s(n, world, r, true, 42, drop_last, b);
              s.set_epoch(2);
              ranks.push_back(s.indices_from(offset));
              taken += static_cast<int64_t>(ranks.back().size());
              if (offset == 0) {
                EXPECT_EQ(ranks.back(), s.indices());
              }
              EXPECT_EQ(batches_in(static_cast<int64_t>(ranks.back().size()), b, drop_last),
                        batches_in(static_cast<int64_t>(ranks[0].size()), b, drop_last))
                  << "rank " << r;
            }
            if (offset == 0) continue;
            const int64_t rest = n - offset;
            if (drop_last) {
              EXPECT_LE(taken, rest);
              EXPECT_LT(rest - taken, world);
              for (const auto& mine : ranks) EXPECT_EQ(mine.size(), ranks[0].size());
            } else {
              EXPECT_GE(taken, rest);
              EXPECT_LT(taken - rest, world);
              const int64_t last = rest % (b * world);
              if (taken > rest) {
                EXPECT_TRUE(last > 0 && last < world) << "padded where every rank had a last batch";
              }
            }
            // The order from `offset` on, then the padding from its start.
            std::vector<int64_t> expected(order.begin() + offset, order.end());
            for (int64_t i = 0; static_cast<int64_t>(expected.size()) < taken; ++i) expected.push_back(order[i % n]);
            expected.resize(static_cast<size_t>(taken));
            for (int64_t k = 0; k * b < static_cast<int64_t>(ranks[0].size()); ++k) {
              std::multiset<int64_t> from_ranks;
              for (const auto& mine : ranks) {
                const auto batch = kth_batch(mine, k, b);
                from_ranks.insert(batch.begin(), batch.end());
              }
              const auto block = kth_batch(expected, k, b * world);
              EXPECT_EQ(from_ranks, std::multiset<int64_t>(block.begin(), block.end())) << "k=" << k;
            }
          }
}

// With N divisible by 2b, two ranks with batch b see, at step k, exactly the samples one rank with batch 2b sees:
// both read consecutive positions of the same randperm(seed + epoch), so 2-rank DDP and 1-rank training agree on
// which samples form each global batch.
TEST(DistributedSampler, TwoRanksKthBatchesUnionIsOneRanksDoubleBatch) {
  for (int64_t b : {1, 4, 16})
    for (int64_t n : {2 * b, 6 * b, 40 * b})
      for (int64_t epoch : {0, 3}) {
        DistributedSampler single(n, 1, 0, true, 7, false);
        single.set_epoch(epoch);
        std::vector<std::vector<int64_t>> rank_indices;
        for (int64_t r = 0; r < 2; ++r) {
          DistributedSampler s(n, 2, r, true, 7, false);
          s.set_epoch(epoch);
          rank_indices.push_back(s.indices());
        }
        const std::vector<int64_t> one = single.indices();
        for (int64_t k = 0; k < n / (2 * b); ++k) {
          std::set<int64_t> two;
          for (const auto& idx : rank_indices) {
            const auto batch = kth_batch(idx, k, b);
            ASSERT_EQ(static_cast<int64_t>(batch.size()), b);
            two.insert(batch.begin(), batch.end());
          }
          const auto ref = kth_batch(one, k, 2 * b);
          EXPECT_EQ(two, std::set<int64_t>(ref.begin(), ref.end())) << "b=" << b << " n=" << n << " k=" << k;
        }
      }
}

}  // namespace
}  // namespace ddp
