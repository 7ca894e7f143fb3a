// Tests: RASampler against torchvision's reference class (tests/python/ra_sampler_reference.py), its global order
// and augmentation keys, and the loader seeding each copy of a sample by its key.
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/loader.h"
#include "data/ra_sampler.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

TEST(RASampler, EveryRankMatchesTorchvisionsReferenceSampler) {
  if (!python_has_modules("torch")) GTEST_SKIP() << "no torch in " << python();
  const CommandResult r =
      run_command(python() + " " + shell_quote(source_dir() + "/tests/python/ra_sampler_reference.py"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  int cases = 0, nonempty = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    std::istringstream head(line.substr(0, colon)), tail(line.substr(colon + 1));
    int64_t n = 0, world = 0, rank = 0, shuffle = 0, epoch = 0, seed = 0, reps = 0;
    head >> n >> world >> rank >> shuffle >> epoch >> seed >> reps;
    std::vector<int64_t> expected;
    for (int64_t v = 0; tail >> v;) expected.push_back(v);
    RASampler s(n, world, rank, shuffle != 0, static_cast<uint64_t>(seed), reps);
    s.set_epoch(epoch);
    SCOPED_TRACE(line.substr(0, colon));
    ASSERT_EQ(s.indices(), expected);
    EXPECT_EQ(s.num_samples(), static_cast<int64_t>(expected.size()));
    // The trained global order from position 0 is the same list, and every copy has its own augmentation key.
    const EpochSamples from0 = s.samples_from(0);
    EXPECT_EQ(from0.indices, expected);
    ASSERT_EQ(from0.augment_keys.size(), expected.size());
    ++cases;
    nonempty += expected.empty() ? 0 : 1;
  }
  EXPECT_EQ(cases, 5 * (1 + 2 + 3 + 4) * 3 * 2 * 2);
  EXPECT_GT(nonempty, cases / 2);
}

TEST(RASampler, CopiesOfASampleGetDistinctKeysAndTheFirstKeepsItsIndex) {
  const int64_t n = 300, reps = 3;
  RASampler s(n, /*world=*/1, /*rank=*/0, /*shuffle=*/true, 9, reps);
  const EpochSamples e = s.samples_from(0);
  ASSERT_EQ(e.indices.size(), 256u);
  std::set<int64_t> keys(e.augment_keys.begin(), e.augment_keys.end());
  EXPECT_EQ(keys.size(), e.augment_keys.size());
  for (size_t p = 0; p < e.indices.size(); ++p) {
    EXPECT_EQ(e.augment_keys[p], e.indices[p] + static_cast<int64_t>(p % reps) * n) << p;
    if (p % reps == 0) {
      EXPECT_EQ(e.augment_keys[p], e.indices[p]);  // DistributedSampler's key for the sample
    }
  }
  // The plain sampler's samples keep their index as the key.
  EXPECT_TRUE(DistributedSampler(n, 2, 1, true, 9, false).samples_from(0).augment_keys.empty());
}

TEST(RASampler, TheGlobalOrderIsTheSameForEveryWorldUpToItsLength) {
  // Rank r of world w trains positions r, r + w, ... of the repeated list: resuming at a position on another world
  // goes on in the same order, to that world's end (floor(N // 256 * 256 / w) * w), every rank taking as many
  // positions (as many batches) where the world does not divide the rest: its remainder is dropped.
  const int64_t n = 1029, reps = 4;
  const EpochSamples one = RASampler(n, 1, 0, true, 3, reps).samples_from(0);
  for (const int64_t world : {2, 3, 4})
    for (const int64_t offset : {96, 97, 101, 1021}) {
      for (int64_t rank = 0; rank < world; ++rank) {
        RASampler s(n, world, rank, true, 3, reps);
        const EpochSamples mine = s.samples_from(offset);
        EXPECT_EQ(static_cast<int64_t>(mine.indices.size()), (s.num_samples() * world - offset) / world)
            << world << " " << offset;
        for (size_t i = 0; i < mine.indices.size(); ++i) {
          const auto p = static_cast<size_t>(offset + rank + static_cast<int64_t>(i) * world);
          EXPECT_EQ(mine.indices[i], one.indices[p]) << world << " " << rank << " " << i;
          EXPECT_EQ(mine.augment_keys[i], one.augment_keys[p]) << world << " " << rank << " " << i;
        }
      }
    }
}

TEST(RASampler, RejectsRanksOutsideTheWorldAndNoRepetitions) {
  EXPECT_THROW(RASampler(300, 2, 2, true, 0, 3), std::invalid_argument);
  EXPECT_THROW(RASampler(300, 2, 0, true, 0, 0), std::invalid_argument);
  EXPECT_EQ(RASampler(255, 1, 0, true, 0, 3).num_samples(), 0);  // torchvision trains nothing below 256 samples
}

TEST(RASampler, TheLoaderSeedsEachCopysAugmentationByItsKey) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const Config cfg = mixed_image_folder_config(dir / "f");
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  const int64_t n = ds.train.size();
  auto rows = [&](const std::vector<int64_t>& keys) {
    LoaderOptions o;
    o.batch_size = 4;
    o.workers = 0;
    o.seed = 11;
    o.normalize = false;
    BatchLoader loader(ds.train, {2, 2, 2, 5}, o, 0, keys);
    return loader.next()->images.clone();
  };
  const torch::Tensor same = rows({}), keyed = rows({2, 2 + n, 2 + 2 * n, 5});
  EXPECT_TRUE(torch::equal(same[0], same[1]));   // one key: one crop and flip
  EXPECT_TRUE(torch::equal(keyed[0], same[0]));  // the first copy keeps the index's augmentation
  EXPECT_FALSE(torch::equal(keyed[0], keyed[1]));
  EXPECT_FALSE(torch::equal(keyed[1], keyed[2]));
  EXPECT_TRUE(torch::equal(keyed[3], same[3]));
}

}  // namespace
}  // namespace ddp::test
