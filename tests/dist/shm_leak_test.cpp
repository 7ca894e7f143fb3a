// No kill leaks a shared-memory segment: ranks killed (-9) at several start-up points leave /dev/shm empty.
//
// Seen: killing a rank during start-up leaked 4-8 MiB /dev/shm segments (rank 0 had made the named file, and the
// kill came before every rank had answered). The ranks run in a mount namespace with a tmpfs of their own on
// /dev/shm, so the test sees only their files.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

bool leak_can_unshare() { return run_command("unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>&1").exit_code == 0; }

TEST(ShmLeak, RanksKilledDuringStartUpLeaveNothingInDevShm) {
  if (!leak_can_unshare()) GTEST_SKIP() << "cannot make a mount namespace here (needs root / CAP_SYS_ADMIN)";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 256, 16, 1,
                                         {"data.batch_size=16", "dist.allreduce=shm", "dist.timeout_s=5.0",
                                          "metrics.progress=off"});
  const std::string run = ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "out";
  // start: both ranks on a fresh port. Scenarios: kill rank V (-9) after D seconds, the other rank 0.3 s later
  // (as ddprun stops the rest); "first": kill both the moment anything appears in /dev/shm (before the fix: rank
  // 0's named segment, between its creation and the last rank's answer).
  write_file(dir / "scenarios.sh", R"SH(set -u
shopt -s nullglob
mount -t tmpfs tmpfs /dev/shm || exit 99
start() {
  port=$(( 20000 + RANDOM % 30000 ))
  env="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1"
  env RANK=0 LOCAL_RANK=0 $env $RUN >/dev/null 2>&1 & p0=$!
  env RANK=1 LOCAL_RANK=1 $env $RUN >/dev/null 2>&1 & p1=$!
}
for scenario in "1 0.5" "1 1.2" "0 0.8"; do
  set -- $scenario
  start
  sleep $2
  if [ $1 = 1 ]; then kill -9 $p1; sleep 0.3; kill -9 $p0; else kill -9 $p0; sleep 0.3; kill -9 $p1; fi
  wait 2>/dev/null
done
for attempt in 1; do
  start
  f=(/dev/shm/*)
  while [ ${#f[@]} -eq 0 ] && kill -0 $p0 2>/dev/null; do f=(/dev/shm/*); done
  kill -9 $p0 $p1 2>/dev/null
  wait 2>/dev/null
done
echo "left: $(ls -A /dev/shm | tr '\n' ' ')"
)SH");
  auto r = run_command("RUN=" + shell_quote(run) + " timeout -s KILL 60 unshare -m bash " + dir / "scenarios.sh");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("left: \n"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
