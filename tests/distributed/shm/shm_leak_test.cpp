// No kill leaks a shared-memory segment: ranks killed (-9) at several start-up points leave /dev/shm empty.
//
// The points that matter are those between rank 0 making the named file and every rank answering: a segment
// (4-8 MiB) left there would stay in /dev/shm. The ranks run in a mount namespace with a tmpfs of their own on
// /dev/shm, so the test sees only their files.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

bool leak_can_unshare() { return run_command("unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>&1").exit_code == 0; }

TEST(ShmLeak, RanksKilledDuringStartUpLeaveNothingInDevShm) {
  if (!leak_can_unshare()) GTEST_SKIP() << "cannot make a mount namespace here (needs root / CAP_SYS_ADMIN)";
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 256, 16, 1, {"data.batch_size=16", "dist.allreduce=shm", "dist.timeout_s=5.0", "metrics.progress=off"});
  const std::string run = ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "out";
  // start: both ranks on a fresh port. Scenarios: kill rank V (-9) after D seconds, the other rank 0.3 s later
  // (as ddprun stops the rest); then the exact worst point, through an LD_PRELOAD shim the test builds.
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
# The worst point, made exact by the shim: rank 1 dies as it opens rank 0's segment, before it answers; rank 0 is
# killed while it waits for that answer.
port=$(( 20000 + RANDOM % 30000 ))
env="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1"
env RANK=0 LOCAL_RANK=0 $env $RUN >/dev/null 2>&1 & p0=$!
env RANK=1 LOCAL_RANK=1 LD_PRELOAD=$SHIM $env $RUN >/dev/null 2>&1 & p1=$!
wait $p1
echo "rank 1 ended: $?"
sleep 0.5
kill -9 $p0
wait 2>/dev/null
echo "left: $(ls -A /dev/shm | tr '\n' ' ')"
)SH");
  // The shim: SIGKILL for the process that opens the segment (by its old name, or through /proc/PID/fd/N).
  write_file(dir / "die_at_segment.c", R"C(#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
static void die_at_segment(const char* p) {
  if (p && (strstr(p, "ddptrain-allreduce") || (strncmp(p, "/proc/", 6) == 0 && strstr(p, "/fd/"))))
    kill(getpid(), SIGKILL);
}
#define WRAP(name)                                                        \
  int name(const char* p, int flags, ...) {                              \
    va_list a;                                                            \
    va_start(a, flags);                                                   \
    mode_t m = (mode_t)va_arg(a, int);                                    \
    va_end(a);                                                            \
    die_at_segment(p);                                                    \
    int (*real)(const char*, int, ...) = dlsym(RTLD_NEXT, #name);         \
    return real(p, flags, m);                                             \
  }
WRAP(open)
WRAP(open64)
)C");
  auto cc = run_command("cc -shared -fPIC -o " + dir / "die_at_segment.so" + " " + dir / "die_at_segment.c" + " -ldl");
  ASSERT_EQ(cc.exit_code, 0) << cc.output;
  auto r = run_command("RUN=" + shell_quote(run) + " SHIM=" + dir / "die_at_segment.so" +
                       " timeout -s KILL 60 unshare -m bash " + dir / "scenarios.sh");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 ended: 137\n"), std::string::npos) << r.output;  // the shim's kill came
  EXPECT_NE(r.output.find("left: \n"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
