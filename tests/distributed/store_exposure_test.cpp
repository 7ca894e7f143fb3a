// Who can reach the rendezvous store, and what an outsider who does can learn or change.
//
// The store listens on the rendezvous address only (with --standalone / MASTER_ADDR=127.0.0.1, not on every
// interface: the tests read the kernel's table of listening sockets, /proc/net/tcp and tcp6, while the store waits
// for a peer); a process that connects must not read the keys (the shared-memory segment's name and token among
// them) nor write keys the job obeys. With the job's secret (DDPTRAIN_JOB_SECRET, as ddprun passes it) an outsider using TCPStore's own
// protocol (the venv's torch.distributed.TCPStore) sees opaque names and ciphertext, and its writes change nothing.
#include "tests/launcher/launcher_test_support.h"
#include "tests/support/test_support.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

// Local addresses (kernel hex, e.g. "0100007F" for 127.0.0.1, 32 zeros for [::]) of the sockets listening on `port`.
std::vector<std::string> exposure_listeners(int port) {
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const auto colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) found.push_back(local.substr(0, colon));
    }
  }
  return found;
}

// Waits (up to 20 s) until something listens on `port`; returns its addresses.
std::vector<std::string> exposure_wait_for_listeners(int port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto found = exposure_listeners(port);
    if (!found.empty()) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

// Starts `command` in the background (its own process group); returns its pid.
int exposure_start(const TempDir& dir, const std::string& command) {
  auto r = run_command("setsid bash -c " + shell_quote(command + " >" + dir / "bg.log" + " 2>&1") + " & echo $!");
  return std::stoi(r.output);
}

void exposure_stop(int pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

std::string exposure_job(const TempDir& dir) {
  return write_tiny_job(dir, 64, 16, 1, {"dist.timeout_s=30.0"});
}

TEST(StoreExposure, RankZeroListensOnLoopbackOnlyForMasterAddr127) {
  TempDir dir;
  const std::string cfg = exposure_job(dir);
  const int port = free_port();
  const int pid = exposure_start(dir, "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                                          " exec " + ddptrain_path() + " " + cfg);
  const auto found = exposure_wait_for_listeners(port);
  exposure_stop(pid);
  ASSERT_FALSE(found.empty()) << read_file(dir / "bg.log");
  for (const auto& a : found) EXPECT_EQ(a, "0100007F") << "rank 0's store listens on " << a << ", not 127.0.0.1";
}

TEST(StoreExposure, DdprunStoreListensOnMasterAddrOnly) {
  TempDir dir;
  const int port = free_port_pair();
  // Node 0 of two: its ddprun serves port + 1 and waits for node 1, which never comes.
  const int pid = exposure_start(dir, "exec " + ddprun_path() + " --nnodes=2 --node-rank=0 --master-addr=127.0.0.1 " +
                                          "--master-port=" + std::to_string(port) + " --rdzv-conf timeout=30 true");
  const auto found = exposure_wait_for_listeners(port + 1);
  exposure_stop(pid);
  ASSERT_FALSE(found.empty()) << read_file(dir / "bg.log");
  for (const auto& a : found) EXPECT_EQ(a, "0100007F") << "ddprun's store listens on " << a << ", not 127.0.0.1";
}

// MASTER_ADDR that is not this host's: rank 0 says so at once instead of serving on every interface.
TEST(StoreExposure, MasterAddrOfAnotherHostIsNamed) {
  TempDir dir;
  const std::string cfg = exposure_job(dir);
  const int port = free_port();
  auto r = run_command("RANK=0 WORLD_SIZE=2 MASTER_ADDR=192.0.2.1 MASTER_PORT=" + std::to_string(port) + " " +
                       ddptrain_path() + " " + cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output, "[rank 0] error: rank 0: cannot serve the store on 192.0.2.1:" + std::to_string(port) +
                          ": cannot listen on 192.0.2.1 (192.0.2.1) port " + std::to_string(port) +
                          ": Cannot assign requested address (not an address of this host)\n");
}

// The outsider: connects while rank 0 waits for rank 1, writes the keys a job without a secret would obey (a view
// that makes rank 1 look joined, a verdict, a connect failure, a segment announcement), then lists and reads every
// key until the store goes away, printing what it saw.
constexpr const char* kOutsider = R"(import sys, time, datetime, torch.distributed as d
s = d.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=10))
view = 'world=2\nlibtorch=0\nconfig=-\nhost=h\npid=1'
for k, v in [('ddptrain/view/1', view), ('ddptrain/joined/1', '1'), ('ddptrain/verdict', 'pwned'),
             ('ddptrain/connect_failed', 'pwned'), ('ddptrain/shm_allreduce/segment', '!pwned')]:
    s.set(k, v)
open(sys.argv[2], 'w').close()
seen = {}
try:
    while True:
        for k in s.list_keys():
            try:
                seen[k] = s.get(k)
            except Exception:
                pass
        time.sleep(0.01)
except Exception:
    pass
for k, v in seen.items():
    print('KEY', repr(k), repr(v[:120]))
)";

TEST(StoreExposure, OutsiderCanNeitherReadNorWriteJobStateWithTheSecret) {
  if (!python_has_torch()) GTEST_SKIP() << "needs the venv's torch (the outsider's TCPStore client)";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 256, 16, 1,
                                         {"data.batch_size=16", "dist.timeout_s=20.0", "dist.allreduce=shm",
                                          "metrics.progress=plain"});
  write_file(dir / "outsider.py", kOutsider);
  const int port = free_port();
  const std::string env = "DDPTRAIN_JOB_SECRET=0123456789abcdef0123456789abcdef WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
                          "MASTER_PORT=" + std::to_string(port) + " OMP_NUM_THREADS=1 ";
  auto r = run_command(
      "RANK=0 " + env + "timeout -s KILL 60 " + ddptrain_path() + " " + cfg + " > " + dir / "rank0.log" +
      " 2>&1 & r0=$!; timeout -s KILL 60 " + python() + " " + dir / "outsider.py" + " " + std::to_string(port) + " " +
      dir / "wrote" + " > " + dir / "outsider.log" + " 2>&1 & o=$!; for i in $(seq 400); do [ -e " + dir / "wrote" +
      " ] && break; sleep 0.05; done; RANK=1 " + env + "timeout -s KILL 60 " + ddptrain_path() + " " + cfg +
      " > " + dir / "rank1.log" + " 2>&1; r1=$?; wait $r0; r0rc=$?; wait $o; echo \"$r0rc $r1\"");
  const std::string rank0 = read_file(dir / "rank0.log"), rank1 = read_file(dir / "rank1.log");
  const std::string seen = read_file(dir / "outsider.log");
  EXPECT_EQ(r.output, "0 0\n") << rank0 << rank1 << seen;
  EXPECT_NE(rank0.find("| all-reduce shared memory"), std::string::npos) << rank0;
  EXPECT_EQ((rank0 + rank1).find("pwned"), std::string::npos) << rank0 << rank1;
  // It saw the job's keys (not only its own) but could read none of them.
  std::istringstream lines(seen);
  std::string line;
  int job_keys = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("KEY ", 0) != 0) continue;
    const bool own = line.find("pwned") != std::string::npos || line.find("'ddptrain/view/1'") != std::string::npos ||
                     line.find("'ddptrain/joined/1'") != std::string::npos;
    if (own) continue;
    ++job_keys;
    for (const char* secret : {"ddptrain", "default_pg", "/fd/", "world=", "host=", "127.0.0.1"})
      EXPECT_EQ(line.find(secret), std::string::npos) << "the outsider read \"" << secret << "\": " << line;
  }
  EXPECT_GE(job_keys, 4) << seen;
}

// An outsider's SET that announces a 1 GiB value, then streams it: rank 0's store drops that connection (c10d's libuv
// server, the default in LibTorch 2.11, refuses payloads over 8 MiB) and the job trains on. The issue's "Seen" (one
// such SET grew rank 0 by ~600 MB) does not reproduce with 2.11's store server; this keeps it that way.
constexpr const char* kHugeSet = R"(
import socket, struct, sys
port, pid = int(sys.argv[1]), int(sys.argv[2])
def hwm_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
before = hwm_kib()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(bytes([0]) + struct.pack("<I", 0x3C85F7CE))                        # VALIDATE, TCPStore's magic
s.sendall(bytes([1]) + struct.pack("<Q", 1) + b"k" + struct.pack("<Q", 1 << 30))  # SET "k", 1 GiB announced
sent = 0
try:
    while sent < (256 << 20):
        s.sendall(b"\0" * (1 << 20))
        sent += 1 << 20
except OSError:
    pass
print("SENT_MIB", sent >> 20)
print("GROWTH_KIB", hwm_kib() - before)
)";

TEST(StoreExposure, OutsidersHugeValueIsRefusedWithoutGrowingRankZero) {
  if (!python_has_torch()) GTEST_SKIP() << "needs the venv's python";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 64, 16, 1, {"dist.timeout_s=20.0", "metrics.progress=off"});
  write_file(dir / "huge_set.py", kHugeSet);
  const int port = free_port();
  const std::string env =
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " OMP_NUM_THREADS=1 ";
  auto r = run_command("RANK=0 " + env + ddptrain_path() + " " + cfg + " > " + dir / "rank0.log" +
                       " 2>&1 & r0=$!; for i in $(seq 400); do ss -tlnH '( sport = :" + std::to_string(port) +
                       " )' | grep -q . && break; sleep 0.05; done; " + python() + " " + dir / "huge_set.py" + " " +
                       std::to_string(port) + " $r0 > " + dir / "outsider.log" + " 2>&1; RANK=1 " + env +
                       "timeout -s KILL 60 " + ddptrain_path() + " " + cfg + " > " + dir / "rank1.log" +
                       " 2>&1; r1=$?; wait $r0; echo \"$? $r1\"");
  const std::string outsider = read_file(dir / "outsider.log");
  EXPECT_EQ(r.output, "0 0\n") << read_file(dir / "rank0.log") << read_file(dir / "rank1.log") << outsider;
  const auto growth = outsider.find("GROWTH_KIB ");
  ASSERT_NE(growth, std::string::npos) << outsider;
  const long kib = std::stol(outsider.substr(growth + 11));
  std::cout << "[ measured ] rank 0 peak memory grew by " << kib / 1024 << " MiB ("
            << outsider.substr(0, outsider.find('\n')) << ")\n";
  EXPECT_LT(kib, 64 * 1024) << outsider;
  EXPECT_EQ(outsider.find("SENT_MIB 256"), std::string::npos) << "the store took the whole value: " << outsider;
}

}  // namespace
}  // namespace ddp::test
