// Test helpers: binaries, temp dirs, subprocesses, files, ports and tiny IDX datasets.
#include "tests/support/test_support.h"

#include "amp/autocast.h"
#include "checkpoint/state_dict.h"
#include "data/idx.h"
#include "tests/support/python_fork/namespaces.h"

#include <ATen/cpu/Utils.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <random>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace ddp::test {
namespace {

// PyTorch's c10d FlightRecorder (on by default: TORCH_FR_BUFFER_SIZE 2000) adds a process group to a map before it
// takes its lock (FlightRecorderDetail.hpp, recordWithResetEnabled), so ranks that are threads of one process (the
// in-process tests) can corrupt that map with their first collectives. This process turns it off before any
// collective (an environment already setting it wins); the ddptrain processes it starts inherit that, and nothing
// they print or write depends on it.
// The oracles' python (ddptest_python) serves runs from a fork server only in the namespaces of this process; a
// command the tests run under `ip netns exec` or `unshare` starts a fresh interpreter.
const bool kPythonForkNamespaces = [] {
  const std::string ns = namespaces();
  return !ns.empty() && setenv("DDP_PYTHON_FORK_NAMESPACES", ns.c_str(), /*overwrite=*/0) == 0;
}();

const bool kFlightRecorderOff = [] { return setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0) == 0; }();

}  // namespace

std::string source_dir() { return DDP_SOURCE_DIR; }
std::string binary_dir() { return DDP_BINARY_DIR; }
std::string ddptrain_path() { return binary_dir() + "/ddptrain"; }
std::string python() {
  const char* p = std::getenv("DDP_TEST_PYTHON");
  return p && *p ? p : DDP_DEFAULT_PYTHON;
}
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
std::string mlflow_python() {
  const char* p = std::getenv("DDP_TEST_MLFLOW_PYTHON");
  return p && *p ? p : DDP_MLFLOW_PYTHON;
}
bool python_has_modules(const std::string& modules, const std::string& interpreter) {
  // Each dotted name is looked up part by part with PathFinder, which reads no package's __init__: importing torch
  // and torchvision would cost 4 s of CPU per test, and the oracle a test runs next imports them anyway.
  static const char* const kFind =
      "import importlib.machinery as m, sys\n"
      "def found(name):\n"
      "    parts, path = name.strip().split(\".\"), None\n"
      "    for i in range(len(parts)):\n"
      "        spec = m.PathFinder.find_spec(\".\".join(parts[:i + 1]), path)\n"
      "        if spec is None or (i + 1 < len(parts) and spec.submodule_search_locations is None): return False\n"
      "        path = spec.submodule_search_locations\n"
      "    return True\n"
      "sys.exit(0 if all(found(n) for n in sys.argv[1].split(\",\")) else 1)\n";
  const bool ok =
      run_command(shell_quote(interpreter) + " -c " + shell_quote(kFind) + " " + shell_quote(modules)).exit_code == 0;
  const char* required = std::getenv("DDP_REQUIRE_ORACLES");
  if (!ok && required && std::string(required) == "1")
    ADD_FAILURE() << interpreter << " does not have " << modules
                  << ": the Python oracles are required (DDP_REQUIRE_ORACLES=1, as scripts/test sets it)";
  return ok;
}
bool python_has_torch() { return python_has_modules("torch"); }
std::string fashion_mnist_dir() {
  const char* dir = std::getenv("DDP_FASHION_MNIST_DIR");
  return dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
}
std::string mnist_fixture_dir() { return source_dir() + "/tests/fixtures/mnist"; }
bool have_fashion_mnist() {
  const bool ok = std::filesystem::exists(fashion_mnist_dir() + "/train-images-idx3-ubyte.gz");
  const char* required = std::getenv("DDP_REQUIRE_ORACLES");
  if (!ok && required && std::string(required) == "1")
    ADD_FAILURE() << fashion_mnist_dir() << " has no Fashion-MNIST: it is required (DDP_REQUIRE_ORACLES=1, as "
                  << "scripts/test sets it; scripts/setup installs Debian's dataset-fashion-mnist)";
  return ok;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ddptest-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandResult run_command(const std::string& command_line) {
  CommandResult r;
  std::string cmd = "bash -c " + shell_quote(command_line) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed for: " + command_line);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.exit_code = 128 + WTERMSIG(status);
  return r;
}

std::string made_shard_pattern(const std::string& output, const std::string& split) {
  std::smatch m;
  const std::regex line(split + R"re(: \d+ samples in \d+ shard\(s\): data\.\w+_shards = "([^"]+)")re");
  return std::regex_search(output, m, line) ? m.str(1) : "";
}

std::string rank_line_with(const std::vector<RankResult>& ranks, const std::string& text) {
  std::string found;
  for (const RankResult& r : ranks) {
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (line.find(text) != std::string::npos) found = line;
  }
  return found;
}

bool built_with_libcurl() {
#ifdef DDP_WITH_DOWNLOAD
  return true;
#else
  return false;
#endif
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string warnings_of_the_job(const std::string& output) {
  // This machine's autocast warnings, as the trainer words them ("" for a dtype its CPU computes in).
  std::vector<std::string> of_the_cpu;
  for (const c10::ScalarType dtype : {c10::kBFloat16, c10::kHalf})
    if (std::string w = cpu_autocast_warning(dtype, at::cpu::get_cpu_capabilities()); !w.empty())
      of_the_cpu.push_back("warning: " + w);
  std::string kept;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const auto is = [&line](const std::string& w) { return line.find(w) != std::string::npos; };
    if (is("warning") && !is("warning: straggler: ") && std::none_of(of_the_cpu.begin(), of_the_cpu.end(), is))
      kept += line + "\n";
  }
  return kept;
}

bool port_is_free(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// A port below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default): ports there are handed to
// every outgoing connection (Gloo's, the store clients' of the tests running beside this one), so one found free
// there can be taken before the server meant for it binds. Below the range only another test's choice can take it.
int free_port() {
  static std::mutex mutex;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  int ephemeral_low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> ephemeral_low;
  const int low = 10000, high = std::max(low + 1000, ephemeral_low - 2);
  std::lock_guard<std::mutex> lock(mutex);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = low + static_cast<int>(rng() % static_cast<unsigned>(high - low));
    if (port_is_free(port)) return port;
  }
  throw std::runtime_error("no free port in " + std::to_string(low) + "-" + std::to_string(high));
}

void write_tiny_mnist(const std::string& dir, int n_train, int n_test, int seed) {
  std::filesystem::create_directories(dir);
  torch::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  auto make = [&](int n, const std::string& prefix) {
    torch::Tensor labels = torch::randint(10, {n}, gen, torch::kInt64);
    // Class-dependent bright square plus noise: learnable in a few steps.
    torch::Tensor images = torch::randint(0, 60, {n, 28, 28}, gen, torch::kInt64);
    for (int i = 0; i < n; ++i) {
      int64_t c = labels[i].item<int64_t>();
      int64_t r0 = (c / 5) * 12 + 2, c0 = (c % 5) * 5 + 1;
      images[i].slice(0, r0, r0 + 10).slice(1, c0, c0 + 4).add_(180);
    }
    write_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", images.clamp(0, 255).to(torch::kUInt8));
    write_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels.to(torch::kUInt8));
  };
  make(n_train, "train");
  make(n_test, "t10k");
}

void write_data_and_net_init(const TempDir& dir) {
  write_tiny_mnist(dir / "data", 400, 32, 5);
  auto init = run_command(python() + " " + source_dir() + "/tests/python/make_net_init.py " + dir / "init.pt" + " 11");
  ASSERT_EQ(init.exit_code, 0) << init.output;
}

void write_tiny_cifar10(const std::string& dir, int per_train_file, int n_test, int seed) {
  std::filesystem::create_directories(dir);
  torch::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  auto make = [&](int n, const std::string& name) {
    torch::Tensor labels = torch::randint(10, {n, 1}, gen, torch::kInt64);
    torch::Tensor colour = torch::stack({labels * 25, 250 - labels * 25, (labels % 3) * 100}, 1).view({n, 3, 1, 1});
    torch::Tensor images = (torch::randint(0, 50, {n, 3, 32, 32}, gen, torch::kInt64) + colour).clamp(0, 255);
    torch::Tensor records = torch::cat({labels, images.view({n, -1})}, 1).to(torch::kUInt8).contiguous();
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(records.data_ptr<uint8_t>()), records.numel());
  };
  for (int i = 1; i <= 5; ++i) make(per_train_file, "data_batch_" + std::to_string(i) + ".bin");
  make(n_test, "test_batch.bin");
}

std::string write_mnist_job(const TempDir& dir, const std::string& data_dir, const std::vector<std::string>& keys) {
  static const std::regex bare_value(R"(true|false|[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
  std::vector<std::string> order;
  std::map<std::string, std::string> sections;
  auto add = [&](const std::string& section, const std::string& key, const std::string& value) {
    if (!sections.count(section)) order.push_back(section);
    std::string literal = value;
    if (!std::regex_match(value, bare_value)) {
      literal = "\"";
      for (char c : value) literal += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      literal += "\"";
    }
    sections[section] += key + " = " + literal + "\n";
  };
  add("data", "dataset", "mnist");
  add("data", "dir", data_dir);
  for (const auto& k : keys) {
    const size_t dot = k.find('.'), eq = k.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot > eq)
      throw std::invalid_argument("write_mnist_job: expected section.key=value, got " + k);
    add(k.substr(0, dot), k.substr(dot + 1, eq - dot - 1), k.substr(eq + 1));
  }
  std::string toml;
  for (const auto& section : order) toml += "[" + section + "]\n" + sections[section];
  write_file(dir / "cfg.toml", toml);
  return dir / "cfg.toml";
}

std::string as_own_host() {
  return "unshare -m -p -f --mount-proc sh -c 'mount -t tmpfs tmpfs /dev/shm && exec \"$0\" \"$@\"' ";
}

bool own_host_allowed() { return run_command(as_own_host() + "true 2>&1").exit_code == 0; }

std::string write_tiny_job(const TempDir& dir, int n_train, int n_test, int data_seed,
                           const std::vector<std::string>& keys) {
  write_tiny_mnist(dir / "data", n_train, n_test, data_seed);
  return write_mnist_job(dir, dir / "data", keys);
}

std::vector<RankResult> run_ranks(int world_size, const std::string& args, const std::string& extra_env,
                                  int threads_per_rank, const std::string& cwd,
                                  const std::vector<std::string>& rank_prefix) {
  TempDir logs;
  const int port = free_port();
  std::string script = cwd.empty() ? "" : "cd " + shell_quote(cwd) + " || exit 1\n";
  for (int r = 0; r < world_size; ++r) {
    script += "(env RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
              " WORLD_SIZE=" + std::to_string(world_size) + " LOCAL_WORLD_SIZE=" + std::to_string(world_size) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
              " OMP_NUM_THREADS=" + std::to_string(threads_per_rank) + " " + extra_env + " " +
              (static_cast<size_t>(r) < rank_prefix.size() ? rank_prefix[r] + " " : "") + shell_quote(ddptrain_path()) +
              " " + args + " > " + logs.path() + "/out" + std::to_string(r) + " 2>&1; echo $? > " + logs.path() +
              "/rc" + std::to_string(r) + ") &\n";
  }
  script += "wait\n";
  run_command(script);
  std::vector<RankResult> results(world_size);
  for (int r = 0; r < world_size; ++r) {
    results[r].output = read_file(logs / ("out" + std::to_string(r)));
    results[r].exit_code = std::stoi(read_file(logs / ("rc" + std::to_string(r))));
  }
  return results;
}

CommandResult run_python_ranks(int world_size, const std::string& python_args) {
  const int port = free_port();
  std::string script;
  for (int r = 0; r < world_size; ++r)
    script += "RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world_size) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " OMP_NUM_THREADS=1 " + python() + " " +
              python_args + " & ";
  return run_command(script + "wait");
}

CommandResult run_ddprun_killing_a_worker(const std::string& args, const std::string& out, int kill_at) {
  return run_command(binary_dir() + "/ddprun " + args + " > " + out + ".log 2>&1 & p=$!; for i in $(seq 600); do " +
                     "grep -q '\"step\":" + std::to_string(kill_at) + ",' " + out +
                     "/metrics.jsonl 2>/dev/null && break; sleep 0.05; done; for i in $(seq 600); do ls " + out +
                     "/checkpoints/step-*.json >/dev/null 2>&1 && break; sleep 0.05; done; "
                     "kill -9 $(pgrep -P $p | tail -n 1); "
                     "wait $p; echo rc $?");
}

CommandResult save_torchvision_init(const std::string& path, const std::string& model, int num_classes, int seed) {
  return run_command(python() + " -c \"import sys, torch, torchvision; torch.manual_seed(" + std::to_string(seed) +
                     "); torch.save(dict(torchvision.models." + model + "(num_classes=" + std::to_string(num_classes) +
                     ").state_dict()), sys.argv[1])\" " + shell_quote(path));
}

namespace {

// Calls f(name, a's tensor, b's tensor) for every entry of two state-dict files, in float64.
void for_each_state_pair(const std::string& path_a, const std::string& path_b,
                         const std::function<void(const std::string&, const torch::Tensor&, const torch::Tensor&)>& f) {
  auto a = load_state_dict_file(path_a), b = load_state_dict_file(path_b);
  if (a.size() != b.size()) throw std::runtime_error("state dicts differ in size");
  std::map<std::string, torch::Tensor> bm(b.begin(), b.end());
  for (const auto& [name, t] : a) {
    auto it = bm.find(name);
    if (it == bm.end() || it->second.sizes() != t.sizes()) throw std::runtime_error("key/shape differs: " + name);
    f(name, t.to(torch::kFloat64), it->second.to(torch::kFloat64));
  }
}

}  // namespace

double max_state_diff(const std::string& path_a, const std::string& path_b) {
  double diff = 0;
  for_each_state_pair(path_a, path_b, [&](const std::string&, const torch::Tensor& a, const torch::Tensor& b) {
    diff = std::max(diff, (a - b).abs().max().item<double>());
  });
  return diff;
}

ScaledStateDiff largest_scaled_state_diff(const std::string& path_a, const std::string& path_b) {
  ScaledStateDiff worst;
  for_each_state_pair(path_a, path_b, [&](const std::string& name, const torch::Tensor& a, const torch::Tensor& b) {
    if (a.numel() == 0) return;
    const double abs = (a - b).abs().max().item<double>(), scale = b.abs().max().item<double>();
    const double relative = abs / std::max(1.0, scale);
    if (relative > worst.relative || worst.name.empty()) worst = {name, abs, scale, relative};
  });
  return worst;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace ddp::test
