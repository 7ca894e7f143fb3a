// expand_hostlist (distributed/slurm_hostlist.h) names the hosts `scontrol show hostnames` names, on the forms Slurm
// documents, and refuses malformed expressions with one line naming them.
#include "distributed/slurm_hostlist.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ddp::test {
namespace {

// scontrol reads a configuration before any command; a minimal one lets `show hostnames` run with no cluster.
std::vector<std::string> scontrol_hostnames(const TempDir& dir, const std::string& expression) {
  write_file(dir / "slurm.conf",
             "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost\n");
  const CommandResult r = run_command("SLURM_CONF=" + shell_quote(dir / "slurm.conf") + " scontrol show hostnames " +
                                      shell_quote(expression) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << expression << "\n" << r.output;
  std::vector<std::string> out;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(SlurmHostlist, SameHostsAsScontrolShowHostnames) {
  if (run_command("command -v scontrol >/dev/null").exit_code != 0) GTEST_SKIP() << "scontrol (slurm-client) absent";
  TempDir dir;
  for (const std::string expression :
       {"node1", "gpu[01-04,07],login1", "n[1-2]-ib[3,5]", "a[8-11]", "a[008-011]", "x[9-10]", "rack[1,3]-n[01-02]",
        "c[1-3],d[05-06],e7", "host-[0]", "h[1],h[2],g[10-12]", "n[099-101]"}) {
    SCOPED_TRACE(expression);
    EXPECT_EQ(expand_hostlist(expression), scontrol_hostnames(dir, expression));
  }
}

TEST(SlurmHostlist, MalformedExpressionsAreRefusedNamingThem) {
  for (const auto& [expression, says] :
       std::vector<std::pair<std::string, std::string>>{{"gpu[01-04", "'[' without its ']'"},
                                                        {"gpu01-04]", "']' without its '['"},
                                                        {"gpu[04-01]", "runs backwards"},
                                                        {"ab[1-2]c", "\"c\" follows the last bracket group"},
                                                        {"gpu[a-b]", "not a number"},
                                                        {"gpu[]", "not a number"},
                                                        {"a,,b", "empty host name"},
                                                        {"n[[1]]", "nested brackets"},
                                                        {"n[0-99999999]", "more than 65536 hosts"},
                                                        {"a[0-999]b[0-999]", "more than 65536 hosts"}}) {
    const std::string error = error_of([&expression = expression] { expand_hostlist(expression); });
    EXPECT_NE(error.find("hostlist \"" + expression + "\""), std::string::npos) << error;
    EXPECT_NE(error.find(says), std::string::npos) << expression << ": " << error;
  }
}

}  // namespace
}  // namespace ddp::test
