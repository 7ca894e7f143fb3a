// The run's line of checkpoints (latest.json): retention past corrupt higher-numbered checkpoints, auto after an
// older explicit resume, a newest that passes its CRC but does not parse, manifests rewritten by a JSON tool,
// steps of the line without a manifest, debris of interrupted writes, out-of-range checkpoint fields; a payload written
// as it is made.
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/torch_save/pickle_reader.h"
#include "checkpoint/state_dict.h"
#include "tests/checkpoint/resume_job.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <sys/stat.h>

#include <filesystem>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// One epoch of ckpt_job_config: 20 steps, checkpoints at 4, 8, .., 20 (the last 3 kept).
std::string line_config(const TempDir& dir) { return ckpt_job_config(dir) + " --training.epochs=1"; }

// DIR/step-N.pt holding `payload`, with a manifest whose size and CRC32 match it (it passes the integrity check).
void line_write_checkpoint(const std::string& dir, int64_t step, const std::vector<char>& payload) {
  const CheckpointStore store(dir, 1, 0);
  write_file(store.payload_path(step), std::string(payload.begin(), payload.end()));
  nlohmann::json manifest = {{"format_version", 1},
                             {"file", fs::path(store.payload_path(step)).filename().string()},
                             {"step", step},
                             {"epoch", 0},
                             {"bytes", payload.size()},
                             {"crc32", crc32_of(payload)},
                             {"eval_accuracy", nullptr}};
  write_file(store.manifest_path(step), manifest.dump() + "\n");
}

// The uninterrupted run (DIR/full) and one stopped after `steps` (DIR/part), both of line_config.
void line_full_and_stopped_runs(const TempDir& dir, const std::string& cfg, int steps) {
  auto full = ckpt_train(cfg, "--job.out_dir=" + dir / "full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  auto part = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=" + std::to_string(steps));
  ASSERT_EQ(part.exit_code, 0) << part.output;
}

TEST(CheckpointLine, CorruptHigherNumberedCheckpointsNeverCostTheFreshOnes) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  line_full_and_stopped_runs(dir, cfg, 8);
  // Three checkpoints numbered above anything this run writes (keep_last = 3), failing their CRC check.
  const std::string ckpts = dir / "part/checkpoints";
  for (int64_t step : {1000, 1001, 1002}) {
    line_write_checkpoint(ckpts, step, std::vector<char>(100, 'x'));
    write_file(CheckpointStore(ckpts, 1, 0).payload_path(step), std::string(100, 'y'));
  }
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
  // The run's own checkpoints survived retention: a longer run continues from the last one, not from step 0.
  auto more = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.epochs=2 --training.max_steps=22");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("resumed from " + ckpts + "/step-00000020.pt at step 20"), std::string::npos)
      << more.output;
  for (int64_t step : {1000, 1001, 1002})  // not this run's: never deleted
    EXPECT_TRUE(fs::exists(CheckpointStore(ckpts, 1, 0).payload_path(step))) << step;
}

TEST(CheckpointLine, AutoFollowsTheLineAfterResumingFromAnOlderCheckpoint) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  line_full_and_stopped_runs(dir, cfg, 16);  // 8, 12, 16
  // Back to step 8 explicitly, on to 14: the timeline of 12 and 16 is abandoned.
  auto back = ckpt_train(
      cfg, "--job.out_dir=" + dir / "part --training.max_steps=14 --checkpoint.resume=" + ckpts + "/step-00000008.pt");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + ckpts + "/step-00000014.pt at step 14"), std::string::npos) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
  // The abandoned timeline's checkpoints were moved aside when this line reached their steps, not overwritten.
  EXPECT_TRUE(fs::exists(ckpts + "/displaced-1-step-00000012.pt")) << r.output;
  EXPECT_TRUE(fs::exists(ckpts + "/displaced-1-step-00000016.json")) << r.output;
}

TEST(CheckpointLine, NewestThatPassesItsCrcButDoesNotParseFallsBack) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  line_full_and_stopped_runs(dir, cfg, 10);
  const std::vector<char> garbage(5000, 'g');
  line_write_checkpoint(ckpts, 10, garbage);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: skipping checkpoint " + ckpts + "/step-00000010.pt: not a readable checkpoint"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
  // The unreadable one is left as it was (off the line: retention never deletes it).
  EXPECT_EQ(read_file(ckpts + "/step-00000010.pt"), std::string(garbage.begin(), garbage.end()));
}

TEST(CheckpointLine, ManifestRewrittenByAJsonToolIsStillRead) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string manifest = dir / "part/checkpoints/step-00000008.json";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=8").exit_code, 0);
  auto tool = run_command("python3 -m json.tool --sort-keys --indent 4 " + manifest + " > " + dir / "m.json" +
                          " && mv " + dir / "m.json" + " " + manifest);
  ASSERT_EQ(tool.exit_code, 0) << tool.output;
  ASSERT_NE(read_file(manifest).find("\n    \"bytes\": "), std::string::npos) << read_file(manifest);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + dir / "part/checkpoints/step-00000008.pt at step 8"), std::string::npos)
      << r.output;
  EXPECT_EQ(warnings_of_the_job(r.output), "") << r.output;
}

TEST(CheckpointLine, UnreadableManifestIsAWarningAndNeverOverwritten) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=8").exit_code, 0);
  write_file(ckpts + "/step-00000012.json", "{\"step\": 12, \"file\": ");  // cut short
  write_file(ckpts + "/step-00000012.pt", "someone's bytes");
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=12");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: unreadable checkpoint manifest " + ckpts +
                          "/step-00000012.json: not valid JSON (left in place)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("moved aside to " + ckpts + "/displaced-1-step-00000012.{pt,json}"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(ckpts + "/displaced-1-step-00000012.json"), "{\"step\": 12, \"file\": ");
  EXPECT_EQ(read_file(ckpts + "/displaced-1-step-00000012.pt"), "someone's bytes");
  EXPECT_EQ(CheckpointStore::verify(*CheckpointStore::read_manifest(ckpts + "/step-00000012.json")), "");
}

TEST(CheckpointLine, ManifestNamingAFileOutsideTheFolderIsUnreadable) {
  TempDir dir;
  write_file(dir / "victim", "keep me");
  fs::create_directories(dir / "ckpts");
  const std::string manifest = dir / "ckpts/step-00000004.json";
  write_file(manifest, R"({"format_version": 1, "file": "../victim", "step": 4, "epoch": 0, "bytes": 7,
                           "crc32": 0, "eval_accuracy": null})");
  EXPECT_NE(error_of([&] { CheckpointStore::read_manifest(manifest); }).find("field \"file\" is not a file name"),
            std::string::npos);
  std::vector<std::string> warnings;
  CheckpointStore store(dir / "ckpts", 1, 0);
  EXPECT_TRUE(store.list([&](const std::string& w) { warnings.push_back(w); }).empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(manifest), std::string::npos) << warnings[0];
  store.save(std::vector<char>(10, 'a'), 8, 0, -1);  // retention never reaches it
  EXPECT_EQ(read_file(dir / "victim"), "keep me");
  EXPECT_TRUE(fs::exists(manifest));
}

TEST(CheckpointLine, DebrisOfInterruptedWritesIsRemovedAtStart) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=8").exit_code, 0);
  const std::string payload = read_file(ckpts + "/step-00000008.pt");
  const std::vector<std::string> debris = {ckpts + "/step-00000012.pt.tmp-4242", ckpts + "/step-00000012.json.tmp-4242",
                                           ckpts + "/latest.json.tmp-7", ckpts + "/step-00000012.pt",
                                           dir / "part/model.pt.tmp-99"};
  const std::vector<std::string> foreign = {ckpts + "/notes.txt", ckpts + "/step-00000012.pt.bak",
                                            dir / "part/model.pt.tmp-abc", ckpts + "/step-00000012.pt.tmp-"};
  for (const auto& p : debris) write_file(p, payload.substr(0, 1000));
  // A whole payload whose manifest never came: the save had already put its step at the head of the line.
  write_file(ckpts + "/step-00000012.pt", payload);
  const auto line = nlohmann::json::parse(read_file(ckpts + "/latest.json"));
  std::vector<int64_t> steps = line.at("line").get<std::vector<int64_t>>();
  steps.insert(steps.begin(), 12);
  write_file(ckpts + "/latest.json", nlohmann::json{{"format_version", 1}, {"line", steps}}.dump() + "\n");
  for (const auto& p : foreign) write_file(p, "mine");
  // A checkpoint's name without a manifest whose step the line does not name is not ddptrain's: a user's file.
  write_file(ckpts + "/step-00000100.pt", payload);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
  for (const auto& p : debris) EXPECT_FALSE(fs::exists(p)) << p << "\n" << r.output;
  for (const auto& p : foreign) EXPECT_EQ(read_file(p), "mine") << p;
  EXPECT_EQ(read_file(ckpts + "/step-00000100.pt"), payload);
  EXPECT_NE(r.output.find("removed " + ckpts + "/step-00000012.pt (left by an interrupted write)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step-00000100.pt"), std::string::npos) << r.output;
}

// resume = a device or a FIFO: one error naming it, at once (a FIFO's open would wait for a writer, /dev/zero's read
// for an end that never comes).
TEST(CheckpointLine, ResumeFromADeviceOrAPipeIsRefusedAtOnce) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string fifo = dir / "pipe.pt";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo}) {
    const auto r = run_command("timeout -s KILL 60 env OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg +
                               " --job.out_dir=" + dir / "o" + " --checkpoint.resume=" + path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("error: resume: " + path + ": not a regular file, so not a checkpoint"), std::string::npos)
        << r.output;
  }
}

// A payload without its manifest whose step the line names is debris, unless `resume` names it: then it is resumed
// from and stays. One the line does not name (a file put there by hand) stays too.
TEST(CheckpointLine, APayloadWithoutManifestThatResumeNamesIsKept) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=8").exit_code, 0);
  const CheckpointStore store(ckpts, 1, 0);
  for (const int64_t step : {int64_t{4}, int64_t{8}}) ASSERT_TRUE(fs::remove(store.manifest_path(step)));
  const std::string payload = read_file(store.payload_path(8));
  fs::rename(store.payload_path(8), ckpts + "/step-00000050.pt");
  auto r = ckpt_train(
      cfg, "--job.out_dir=" + dir / "part --training.max_steps=10 --checkpoint.resume=" + store.payload_path(4));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at step 4"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("removed "), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(store.payload_path(4)));
  EXPECT_EQ(read_file(ckpts + "/step-00000050.pt"), payload);
}

struct LineOutOfRange {
  std::string entry;
  int64_t value;
};

// Step 10's checkpoint with one entry replaced.
std::vector<char> line_crafted_checkpoint(const std::string& source, const LineOutOfRange& c) {
  c10::impl::GenericDict d = read_torch_save(read_bytes(source)).toGenericDict();
  d.insert_or_assign(c.entry, c.value);
  return torch_save_bytes(d);
}

TEST(CheckpointLine, OutOfRangeFieldsAreRefusedNamingFileAndFieldOrSkippedByAuto) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  line_full_and_stopped_runs(dir, cfg, 10);
  const std::string source = dir / "step10.pt";
  fs::copy_file(ckpts + "/step-00000010.pt", source);
  constexpr int64_t kHuge = int64_t{1} << 62;
  const std::vector<LineOutOfRange> cases = {{"epoch_sample_offset", -kHuge},
                                             {"batch_in_epoch", -kHuge},
                                             {"batch_in_epoch", kHuge},
                                             {"epoch", -1},
                                             {"batch_size", -kHuge}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string bad = dir / ("bad" + std::to_string(i) + ".pt");
    const std::vector<char> bytes = line_crafted_checkpoint(source, cases[i]);
    write_file(bad, std::string(bytes.begin(), bytes.end()));
    auto r = ckpt_train(cfg, "--job.out_dir=" + dir / ("x" + std::to_string(i)) + " --checkpoint.resume=" + bad);
    EXPECT_EQ(r.exit_code, 1) << cases[i].entry << ": " << r.output;
    EXPECT_NE(r.output.find("error: resume from " + bad + ": checkpoint entry \"" + cases[i].entry + "\" is "),
              std::string::npos)
        << r.output;
  }
  // As the newest of the line (size and CRC intact): auto skips it loudly and continues exactly from step 8.
  line_write_checkpoint(ckpts, 10, line_crafted_checkpoint(source, cases[0]));
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: skipping checkpoint " + ckpts +
                          "/step-00000010.pt: checkpoint entry \"epoch_sample_offset\" is "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("at step 8"), std::string::npos) << r.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"));
}

// A step of the line without a manifest (a crash while it was written) is handed back as data, not as a warning, so
// a caller says it once (a job with a copy on every node) or per folder; a corrupt one is a warning and left out.
TEST(CheckpointLine, StepsOfTheLineWithoutAManifestAreReportedApartFromCorruptOnes) {
  TempDir dir;
  const CheckpointStore store(dir / "ckpts", 3, 0);
  fs::create_directories(dir / "ckpts");
  line_write_checkpoint(store.dir(), 4, std::vector<char>(50, 'a'));
  line_write_checkpoint(store.dir(), 8, std::vector<char>(50, 'b'));
  fs::resize_file(store.payload_path(8), 10);
  store.write_line({12, 8, 4});
  std::vector<std::string> warnings;
  const CheckpointStore::Candidates c = store.resume_candidates([&](const std::string& w) { warnings.push_back(w); });
  ASSERT_EQ(c.usable.size(), 1u);
  EXPECT_EQ(c.usable[0].step, 4);
  EXPECT_EQ(c.missing, std::vector<int64_t>{12});
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_NE(warnings[0].find("skipping corrupt checkpoint: " + store.payload_path(8)), std::string::npos)
      << warnings[0];
  EXPECT_EQ(store.missing_from_line(12), "skipping checkpoint step 12 of the line in " + store.dir() +
                                             "/latest.json: " + store.manifest_path(12) +
                                             " is missing (a crash while it was written?)");
}

// In a run with one folder, each step of the line without a manifest is one warning, not counted as skipped: the run
// resumes from the newest usable step.
TEST(CheckpointLine, ARunSaysEachStepOfItsLineWithoutAManifestAndResumesBelowIt) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=12").exit_code, 0);
  const CheckpointStore store(ckpts, 3, 0);
  fs::remove(store.manifest_path(12));
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: " + store.missing_from_line(12)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + store.payload_path(8) + " at step 8"), std::string::npos) << r.output;
}

TEST(CheckpointLine, NothingUsableIsAnErrorNotAFreshStart) {
  TempDir dir;
  const std::string cfg = line_config(dir);
  const std::string ckpts = dir / "part/checkpoints";
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=4").exit_code, 0);
  fs::resize_file(ckpts + "/step-00000004.pt", 10);
  auto r = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: resume: no usable checkpoint in " + ckpts + " (1 skipped"), std::string::npos)
      << r.output;
  EXPECT_EQ(fs::file_size(ckpts + "/step-00000004.pt"), 10u);
}

// A payload handed over in pieces as it is made: its manifest's size and CRC32 are the file's, as for one written
// whole; a maker that fails midway leaves no payload, no temp file and the line as it was.
TEST(CheckpointLine, APayloadWrittenAsItIsMadeHasTheManifestOfTheWholeBytes) {
  TempDir dir;
  CheckpointStore store(dir / "c", 3, 0);
  std::vector<char> whole(3 << 20);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<char>((i * 2654435761u) >> 13);
  const CheckpointInfo written = store.save(whole, 2, 0, -1);
  const CheckpointInfo made = store.save(
      [&](const ByteSink& sink) {
        for (size_t at = 0; at < whole.size(); at += 1000000)
          sink(whole.data() + at, std::min<size_t>(1000000, whole.size() - at));
      },
      4, 0, -1);
  EXPECT_EQ(read_file(store.payload_path(4)), std::string(whole.begin(), whole.end()));
  EXPECT_EQ(made.bytes, static_cast<int64_t>(whole.size()));
  EXPECT_EQ(made.crc32, written.crc32);
  // zlib's CRC32, the one Python's zlib.crc32 checks a manifest with.
  EXPECT_EQ(made.crc32, ::crc32(0, reinterpret_cast<const Bytef*>(whole.data()), static_cast<uInt>(whole.size())));
  EXPECT_EQ(made.crc32, crc32_of(read_bytes(store.payload_path(4))));
  EXPECT_EQ(made.crc32, crc32_of_file(store.payload_path(4)));
  EXPECT_EQ(CheckpointStore::verify(*CheckpointStore::read_manifest(store.manifest_path(4))), "");
  EXPECT_THROW(store.save(
                   [&](const ByteSink& sink) {
                     sink(whole.data(), 1000);
                     throw std::runtime_error("the maker failed");
                   },
                   6, 0, -1),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(store.payload_path(6)));
  EXPECT_FALSE(fs::exists(store.manifest_path(6)));
  EXPECT_EQ(store.read_line(), (std::vector<int64_t>{4, 2}));
  for (const auto& entry : fs::directory_iterator(dir / "c"))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

}  // namespace
}  // namespace ddp::test
