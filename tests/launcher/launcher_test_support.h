// Launcher test helpers: ddprun's path, executable scripts, port pairs, job-process counting, two-node runs.
#pragma once

#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp::test {

inline std::string ddprun_path() { return binary_dir() + "/ddprun"; }

// Writes an executable bash script `name` into dir and returns its path.
inline std::string write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir / name;
  write_file(path, "#!/bin/bash\n" + body);
  chmod(path.c_str(), 0755);
  return path;
}

// A free port P whose neighbour P + 1 is free too (two-node ddprun serves its own store on P + 1).
inline int free_port_pair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int p = free_port();
    if (p < 65535 && port_is_free(p + 1)) return p;
  }
  throw std::runtime_error("no free port pair");
}

// KEY=VALUE lines (as `env` prints them) into a map.
inline std::map<std::string, std::string> parse_env_file(const std::string& path) {
  std::map<std::string, std::string> env;
  for (const auto& line : read_lines(path)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// Live processes whose environment holds `tag_assignment` (e.g. "DDPRUN_TEST_TAG=<dir>"): every process of a
// job that ddprun started inherits it, its workers' own children included. Zombies have no environment.
inline std::vector<int> processes_with_env(const std::string& tag_assignment) {
  std::vector<int> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* e = readdir(proc)) {
    const std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string environ;
    try {
      environ = read_file("/proc/" + name + "/environ");
    } catch (const std::exception&) {
      continue;
    }
    std::stringstream vars(environ);
    std::string var;
    while (std::getline(vars, var, '\0'))
      if (var == tag_assignment) found.push_back(std::stoi(name));
  }
  closedir(proc);
  return found;
}

// The pids that the workers wrote into files named like `prefix`* in dir, and which of them are still alive.
inline std::vector<int> pids_in_files(const TempDir& dir, const std::string& prefix) {
  std::vector<int> pids;
  DIR* d = opendir(dir.path().c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) == 0) pids.push_back(std::stoi(read_file(dir / name)));
  }
  if (d) closedir(d);
  return pids;
}

inline std::vector<int> alive(const std::vector<int>& pids) {
  std::vector<int> out;
  for (int pid : pids)
    if (kill(pid, 0) == 0) out.push_back(pid);
  return out;
}

struct TimedResult {
  CommandResult result;
  double seconds = 0;
};

inline TimedResult run_timed(const std::string& command_line) {
  const auto start = std::chrono::steady_clock::now();
  TimedResult t{run_command(command_line), 0};
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

// Two ddprun instances at once (node 1 in the background), each with its own flags and environment prefix.
struct TwoNodeResult {
  CommandResult node0, node1;
  double seconds = 0;
};

inline TwoNodeResult run_two_nodes(const TempDir& dir, const std::string& node0_command,
                                   const std::string& node1_command) {
  const std::string script = "(" + node1_command + " > " + dir / "node1.out" + " 2>&1; echo $? > " + dir / "node1.rc" +
                             ") &\n" + node0_command + " > " + dir / "node0.out" + " 2>&1; echo $? > " +
                             dir / "node0.rc" + "\nwait\n";
  TwoNodeResult r;
  r.seconds = run_timed(script).seconds;
  r.node0 = {std::stoi(read_file(dir / "node0.rc")), read_file(dir / "node0.out")};
  r.node1 = {std::stoi(read_file(dir / "node1.rc")), read_file(dir / "node1.out")};
  return r;
}

// Fresh network namespaces, one per node (each its own network stack: every port is free, nothing else is
// reachable), each with an interface veth0 plugged into a bridge in one more namespace; node n has address
// 10.213.0.(n + 1)/24. The destructor kills whatever still runs inside them and deletes them (the veth pairs and the
// bridge go with them).
class NodeNamespaces {
 public:
  explicit NodeNamespaces(int nodes) {
    const std::string stem = "ddptest_" + std::to_string(getpid()) + "_";
    for (int n = 0; n < nodes; ++n) names_.push_back(stem + std::to_string(n));
    switch_ = stem + "switch";
  }
  ~NodeNamespaces() {
    for (const auto& name : names_)
      run_command("ip netns pids " + name + " 2>/dev/null | xargs -r kill -KILL; ip netns del " + name +
                  " 2>/dev/null");
    run_command("ip netns del " + switch_ + " 2>/dev/null");
  }
  NodeNamespaces(const NodeNamespaces&) = delete;
  NodeNamespaces& operator=(const NodeNamespaces&) = delete;

  // Empty when every namespace is up and connected, else why they could not be made.
  std::string create() {
    if (geteuid() != 0)
      return "creating network namespaces needs root (this test runs as uid " + std::to_string(geteuid()) + ")";
    std::string script = "set -e\nip netns add " + switch_ + "\nip -n " + switch_ + " link add br0 type bridge\n" +
                         "ip -n " + switch_ + " link set br0 up\n";
    for (size_t n = 0; n < names_.size(); ++n) {
      const std::string port = "port" + std::to_string(n);
      script += "ip netns add " + names_[n] + "\nip link add veth0 netns " + names_[n] + " type veth peer name " +
                port + " netns " + switch_ + "\nip -n " + switch_ + " link set " + port + " master br0 up\n" +
                "ip -n " + names_[n] + " addr add " + address(static_cast<int>(n)) + "/24 dev veth0\nip -n " +
                names_[n] + " link set lo up\nip -n " + names_[n] + " link set veth0 up\n";
    }
    const auto r = run_command(script);
    if (r.exit_code != 0)
      return "cannot create network namespaces with iproute2 (exit " + std::to_string(r.exit_code) + "): " + r.output;
    return "";
  }

  static std::string address(int node) { return "10.213.0." + std::to_string(node + 1); }
  // Prefix that runs a command inside node's namespace.
  std::string exec(int node) const { return "ip netns exec " + names_[static_cast<size_t>(node)] + " "; }
  // Shell command listing the pids of the processes inside node's namespace.
  std::string list_pids(int node) const { return "ip netns pids " + names_[static_cast<size_t>(node)]; }
  // Shell line that kills (SIGKILL) every process inside node's namespace, as a machine that lost power.
  std::string kill_all(int node) const { return list_pids(node) + " | xargs -r kill -KILL"; }
  // Pids of the processes still inside node's namespace.
  std::string pids(int node) const { return run_command(list_pids(node)).output; }

 private:
  std::vector<std::string> names_;
  std::string switch_;
};

}  // namespace ddp::test
