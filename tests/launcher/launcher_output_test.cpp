// ddprun output: rank 0 as is, other ranks prefixed [rank N], stdout/stderr kept apart, --log-dir files.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// Each rank writes a stdout line, a stderr line, a line that already carries its prefix (ranks > 0, as
// ddptrain's error lines do), and an unterminated last piece.
std::string talker(const TempDir& dir) {
  return write_script(dir, "talk.sh",
                      "echo \"out from $RANK\"\n"
                      "echo \"err from $RANK\" >&2\n"
                      "[ $RANK != 0 ] && echo \"[rank $RANK] already prefixed\" >&2\n"
                      "printf 'unterminated from %s' $RANK\n");
}

bool has_line(const std::string& output, const std::string& line) {
  return ("\n" + output).find("\n" + line + "\n") != std::string::npos;
}

TEST(LauncherOutputTest, RankZeroAsIsOthersPrefixed) {
  TempDir dir;
  const std::string script = talker(dir);
  auto both = run_command(ddprun_path() + " --nproc-per-node=3 " + script);
  ASSERT_EQ(both.exit_code, 0) << both.output;
  const std::string& out = both.output;
  EXPECT_TRUE(has_line(out, "out from 0")) << out;
  EXPECT_TRUE(has_line(out, "err from 0")) << out;
  EXPECT_TRUE(has_line(out, "unterminated from 0")) << out;
  for (int rank : {1, 2}) {
    const std::string p = "[rank " + std::to_string(rank) + "] ";
    EXPECT_TRUE(has_line(out, p + "out from " + std::to_string(rank))) << out;
    EXPECT_TRUE(has_line(out, p + "err from " + std::to_string(rank))) << out;
    EXPECT_TRUE(has_line(out, p + "already prefixed")) << out;  // not "[rank N] [rank N] ..."
    EXPECT_TRUE(has_line(out, p + "unterminated from " + std::to_string(rank))) << out;
  }
  EXPECT_EQ(out.find("[rank 0]"), std::string::npos) << out;

  // stdout stays stdout and stderr stays stderr.
  auto only_stdout = run_command(ddprun_path() + " --nproc-per-node=2 " + script + " 2>/dev/null");
  ASSERT_EQ(only_stdout.exit_code, 0);
  EXPECT_TRUE(has_line(only_stdout.output, "out from 0")) << only_stdout.output;
  EXPECT_TRUE(has_line(only_stdout.output, "[rank 1] out from 1")) << only_stdout.output;
  EXPECT_EQ(only_stdout.output.find("err from"), std::string::npos) << only_stdout.output;
  EXPECT_EQ(only_stdout.output.find("[ddprun]"), std::string::npos) << only_stdout.output;
}

// --local-ranks-filter (torchrun's): only the listed local ranks reach the console; every rank's log file is whole.
TEST(LauncherOutputTest, LocalRanksFilterShowsOnlyThoseRanksOnTheConsole) {
  TempDir dir;
  const std::string script = talker(dir);
  auto r = run_command(ddprun_path() + " --nproc-per-node=3 --local-ranks-filter=1 --log-dir=" + dir / "logs" + " " +
                       script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_line(r.output, "[rank 1] out from 1")) << r.output;
  EXPECT_TRUE(has_line(r.output, "[rank 1] err from 1")) << r.output;
  EXPECT_EQ(r.output.find("from 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("from 2"), std::string::npos) << r.output;
  for (int rank : {0, 2})
    EXPECT_TRUE(has_line(read_file(dir / ("logs/attempt_0/rank_" + std::to_string(rank) + ".log")),
                         "out from " + std::to_string(rank)));
}

TEST(LauncherOutputTest, LogDirWritesPerRankFiles) {
  TempDir dir;
  const std::string script = talker(dir);
  auto r = run_command(ddprun_path() + " --nproc-per-node=2 --log-dir=" + dir / "logs" + " " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank : {0, 1}) {
    const std::string file = read_file(dir / ("logs/attempt_0/rank_" + std::to_string(rank) + ".log"));
    const std::string n = std::to_string(rank);
    EXPECT_TRUE(has_line(file, "out from " + n)) << file;
    EXPECT_TRUE(has_line(file, "err from " + n)) << file;
    EXPECT_TRUE(has_line(file, "unterminated from " + n)) << file;
    EXPECT_EQ(file.find("[rank " + n + "] [rank"), std::string::npos) << file;  // files carry no added prefix
  }
  EXPECT_TRUE(has_line(r.output, "[rank 1] out from 1")) << r.output;  // --log-dir alone keeps the console

  // --redirects 3: the files only.
  r = run_command(ddprun_path() + " --nproc-per-node=2 --log-dir " + dir / "quiet" + " --redirects 3 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("from"), std::string::npos) << r.output;
  EXPECT_TRUE(has_line(read_file(dir / "quiet/attempt_0/rank_1.log"), "err from 1"));

  // -r 1: stdout to the files only, stderr on the console only.
  r = run_command(ddprun_path() + " --nproc-per-node=2 --log-dir " + dir / "split" + " -r 1 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("out from"), std::string::npos) << r.output;
  EXPECT_TRUE(has_line(r.output, "[rank 1] err from 1")) << r.output;
  const std::string split = read_file(dir / "split/attempt_0/rank_1.log");
  EXPECT_TRUE(has_line(split, "out from 1")) << split;
  EXPECT_EQ(split.find("err from"), std::string::npos) << split;

  // Per local rank: --tee 1:3 copies rank 1's streams to its file; rank 0 gets no file content.
  r = run_command(ddprun_path() + " --nproc-per-node=2 --log-dir " + dir / "tee" + " --tee=1:3 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_line(r.output, "[rank 1] out from 1")) << r.output;
  EXPECT_TRUE(has_line(read_file(dir / "tee/attempt_0/rank_1.log"), "out from 1"));
  EXPECT_EQ(read_file(dir / "tee/attempt_0/rank_0.log"), "");
}

}  // namespace
}  // namespace ddp::test
