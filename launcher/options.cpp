// ddprun command line: parsing and validating torchrun-style flags, and the usage text.
#include "launcher/options.h"

#include "distributed/rendezvous.h"
#include "launcher/env.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <tuple>
#include <utility>

namespace ddp {
namespace {

int64_t parse_integer(const std::string& flag, const std::string& v, int64_t min, int64_t max) {
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used == v.size() && x >= min && x <= max) return x;
  } catch (const std::exception&) {
  }
  throw LaunchUsageError(flag + "=" + v + ": expected an integer in [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]");
}

// "SIGTERM,SIGUSR1" (torchrun's form; "TERM" and lower case also do): the signals a launcher can forward.
std::vector<int> parse_signals(const std::string& flag, const std::string& v) {
  static const std::map<std::string, int> known = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
                                                   {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}};
  std::vector<int> out;
  std::stringstream in(v);
  for (std::string name; std::getline(in, name, ',');) {
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.rfind("SIG", 0) != 0) name = "SIG" + name;
    const auto it = known.find(name);
    if (it == known.end())
      throw LaunchUsageError(flag + "=" + v +
                             ": expected a comma-separated list of SIGTERM, SIGINT, SIGHUP, SIGQUIT, " +
                             "SIGUSR1, SIGUSR2");
    out.push_back(it->second);
  }
  if (out.empty()) throw LaunchUsageError(flag + "=" + v + ": names no signal");
  return out;
}

// "0,2": local ranks, as torchrun's --local-ranks-filter takes them.
std::vector<int64_t> parse_rank_list(const std::string& flag, const std::string& v) {
  std::vector<int64_t> out;
  std::stringstream in(v);
  for (std::string item; std::getline(in, item, ',');) out.push_back(parse_integer(flag, item, 0, 1 << 20));
  if (out.empty()) throw LaunchUsageError(flag + "=" + v + ": names no local rank");
  return out;
}

double parse_seconds(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size() && x >= 0 && x <= 7 * 86400) return x;  // a week at most: nan, inf, 1e300 are refused
  } catch (const std::exception&) {
  }
  throw LaunchUsageError(flag + "=" + v + ": expected a number of seconds >= 0 and <= 604800 (a week)");
}

// "N" or torchrun's elastic "MIN:MAX" into o.min_nodes and o.nnodes.
void parse_nnodes(const std::string& v, LaunchOptions& o) {
  const size_t colon = v.find(':');
  o.min_nodes = parse_integer("--nnodes", v.substr(0, colon), 1, 1 << 20);
  o.nnodes = colon == std::string::npos ? o.min_nodes : parse_integer("--nnodes", v.substr(colon + 1), 1, 1 << 20);
  if (o.min_nodes > o.nnodes) throw LaunchUsageError("--nnodes=" + v + ": MIN is larger than MAX");
}

// "HOST[:PORT]" ("[v6]:PORT" too); the port defaults to `default_port`.
std::pair<std::string, int> parse_endpoint(const std::string& flag, const std::string& v, int default_port) {
  std::string host = v;
  int port = default_port;
  const size_t colon = v.rfind(':');
  const bool bracketed = !v.empty() && v[0] == '[';
  if (colon != std::string::npos && (bracketed ? v[colon - 1] == ']' : v.find(':') == colon)) {
    host = v.substr(0, colon);
    port = static_cast<int>(parse_integer(flag + " port", v.substr(colon + 1), 1, 65535));
  }
  if (bracketed && host.size() >= 2 && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw LaunchUsageError(flag + "=" + v + ": expected HOST[:PORT]");
  return {host, port};
}

bool parse_bool(const std::string& flag, std::string v) {
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "yes" || v == "y") return true;
  if (v == "0" || v == "false" || v == "no" || v == "n") return false;
  throw LaunchUsageError(flag + "=" + v + ": expected true or false");
}

// torch.distributed.run's determine_local_world_size, with the CPUs this process may use for os.cpu_count().
int64_t parse_nproc(const std::string& v, const NodeCounts& node) {
  if (v == "cpu") return node.cpus();
  if (v == "gpu" || v == "auto") {
    const int64_t gpus = node.gpus();
    if (gpus > 0) return gpus;
    if (v == "auto") return node.cpus();
    throw LaunchUsageError(
        "--nproc-per-node=gpu: no CUDA GPU is visible on this node (torchrun: \"Cuda is not available.\"); give a "
        "number, cpu or auto");
  }
  try {
    return parse_integer("--nproc-per-node", v, 1, 1 << 16);
  } catch (const LaunchUsageError&) {
    throw LaunchUsageError("--nproc-per-node=" + v + ": expected a number of workers >= 1, gpu, cpu or auto");
  }
}

StreamSelection parse_streams(const std::string& flag, const std::string& v) {
  StreamSelection s;
  if (v.find(':') == std::string::npos) {
    s.all = static_cast<int>(parse_integer(flag, v, 0, 3));
    return s;
  }
  std::stringstream items(v);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) throw LaunchUsageError(flag + "=" + v + ": expected LOCAL_RANK:STREAMS pairs");
    s.by_local_rank[parse_integer(flag, item.substr(0, colon), 0, 1 << 16)] =
        static_cast<int>(parse_integer(flag, item.substr(colon + 1), 0, 3));
  }
  return s;
}

// torchrun's --rdzv-conf "key=value,..." (timeout is the static rendezvous' name for join_timeout).
void parse_rdzv_conf(const std::string& v, RendezvousConf& conf) {
  const std::map<std::string, double*> seconds = {{"timeout", &conf.join_timeout},
                                                  {"join_timeout", &conf.join_timeout},
                                                  {"last_call_timeout", &conf.last_call_timeout},
                                                  {"close_timeout", &conf.close_timeout},
                                                  {"read_timeout", &conf.read_timeout},
                                                  {"keep_alive_interval", &conf.keep_alive_interval}};
  std::stringstream items(v);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string flag = "--rdzv-conf " + key;
    if (eq == std::string::npos) throw LaunchUsageError("--rdzv-conf=" + v + ": expected key=value pairs");
    const std::string value = item.substr(eq + 1);
    if (auto it = seconds.find(key); it != seconds.end()) {
      *it->second = parse_seconds(flag, value);
    } else if (key == "keep_alive_max_attempt") {
      conf.keep_alive_max_attempt = parse_integer(flag, value, 1, 1000);
    } else if (key == "is_host") {
      conf.is_host = parse_bool(flag, value) ? 1 : 0;
    } else {
      throw LaunchUsageError("--rdzv-conf=" + v + ": unknown key " + key +
                             " (known: join_timeout, timeout, last_call_timeout, close_timeout, read_timeout, "
                             "keep_alive_interval, keep_alive_max_attempt, is_host)");
    }
  }
  if (conf.read_timeout <= 0 || conf.keep_alive_interval <= 0)
    throw LaunchUsageError("--rdzv-conf=" + v + ": read_timeout and keep_alive_interval must be > 0");
}

// torchrun 2.11's flags that ddprun does not take, and why.
const std::map<std::string, std::string> kTorchrunOnly = {
    {"start-method", "each worker is PROGRAM run as a new process (fork + exec); no interpreter to spawn or fork"},
    {"module", "ddprun runs programs, not Python modules: give the program's path"},
    {"m", "ddprun runs programs, not Python modules: give the program's path"},
    {"run-path", "ddprun runs programs, not Python files: give the program's path"},
    {"logs-specs", "--log-dir, --redirects and --tee choose where the workers' output goes"},
    {"event-log-handler", "ddprun writes its events as [ddprun] lines on stderr"},
    {"numa-binding", "bind in PROGRAM's command line (numactl --cpunodebind=N PROGRAM ...)"},
    {"virtual-local-rank", "each worker's LOCAL_RANK is its own"},
    {"duplicate-stdout-filters", "--tee and --local-ranks-filter choose what reaches the console"},
    {"duplicate-stderr-filters", "--tee and --local-ranks-filter choose what reaches the console"},
};

// Flag name without leading dashes, '_' spelled '-'.
std::string canonical(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  if (name == "-r") return "redirects";
  if (name == "-t") return "tee";
  if (name == "-h") return "help";
  return name.substr(name.find_first_not_of('-'));
}

void validate(const LaunchOptions& o) {
  if (o.help) return;
  if (o.program.empty()) throw LaunchUsageError("missing PROGRAM (ddprun [flags] [--] PROGRAM [ARGS...])");
  if (o.standalone && o.nnodes > 1)
    throw LaunchUsageError("--standalone runs one node; it cannot be combined with --nnodes=" +
                           std::to_string(o.nnodes));
  if (o.rdzv_backend != "static" && o.rdzv_backend != "c10d")
    throw LaunchUsageError("--rdzv-backend=" + o.rdzv_backend + ": expected static or c10d");
  if (elastic(o) && o.rdzv_host.empty())
    throw LaunchUsageError("--rdzv-backend=c10d needs --rdzv-endpoint HOST[:PORT] (the host whose ddprun serves the "
                           "rendezvous)");
  if (elastic(o) && o.standalone) throw LaunchUsageError("--standalone makes its own rendezvous; drop --rdzv-backend");
  if (!elastic(o) && o.min_nodes != o.nnodes)
    throw LaunchUsageError("--nnodes=" + std::to_string(o.min_nodes) + ":" + std::to_string(o.nnodes) +
                           ": a node range needs --rdzv-backend=c10d --rdzv-endpoint HOST[:PORT]");
  if (elastic(o)) return;  // node ranks and the master address are agreed at the rendezvous
  if (o.node_rank >= o.nnodes)
    throw LaunchUsageError("--node-rank=" + std::to_string(o.node_rank) + " is out of range for --nnodes=" +
                           std::to_string(o.nnodes));
  if (o.nnodes > 1 && o.master_port >= 65535)
    throw LaunchUsageError("--master-port=65535: with --nnodes > 1 ddprun also uses master-port + 1");
  if (o.streams_chosen && o.log_dir.empty()) throw LaunchUsageError("--redirects/--tee need --log-dir");
  if (o.master_addr.empty()) throw LaunchUsageError("--master-addr is empty");
}

}  // namespace

LaunchOptions with_ranks(LaunchOptions o, const std::vector<int64_t>& local_world_sizes) {
  o.first_rank = 0;
  o.world_size = 0;
  for (size_t n = 0; n < local_world_sizes.size(); ++n) {
    if (static_cast<int64_t>(n) < o.node_rank) o.first_rank += local_world_sizes[n];
    o.world_size += local_world_sizes[n];
  }
  return o;
}

int StreamSelection::for_local_rank(int64_t local_rank) const {
  if (by_local_rank.empty()) return all;
  auto it = by_local_rank.find(local_rank);
  return it == by_local_rank.end() ? 0 : it->second;
}

NodeCounts this_node() {
  return {[] { return cuda_build() ? static_cast<int64_t>(torch::cuda::device_count()) : int64_t{0}; },
          [] { return available_cpus(); }};
}

LaunchOptions parse_launch_args(const std::vector<std::string>& args, const NodeCounts& node) {
  LaunchOptions o;
  std::string endpoint;  // --rdzv-endpoint as written (static: node 0's MASTER_ADDR:MASTER_PORT, as in torchrun)
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> valued = {
      {"nnodes", [&](auto&, auto& v) { parse_nnodes(v, o); }},
      {"nproc-per-node", [&](auto&, auto& v) { o.nproc_per_node = parse_nproc(v, node); }},
      {"node-rank", [&](auto& f, auto& v) { o.node_rank = parse_integer(f, v, 0, 1 << 20), o.node_rank_given = true; }},
      {"master-addr", [&](auto&, auto& v) { o.master_addr = v; }},
      {"master-port", [&](auto& f, auto& v) { o.master_port = static_cast<int>(parse_integer(f, v, 1, 65535)); }},
      {"max-restarts", [&](auto& f, auto& v) { o.max_restarts = parse_integer(f, v, 0, 1 << 30); }},
      {"log-dir", [&](auto&, auto& v) { o.log_dir = v; }},
      {"redirects", [&](auto& f, auto& v) { o.redirects = parse_streams(f, v), o.streams_chosen = true; }},
      {"tee", [&](auto& f, auto& v) { o.tee = parse_streams(f, v), o.streams_chosen = true; }},
      {"run-id", [&](auto&, auto& v) { o.run_id = v; }},
      {"rdzv-id", [&](auto&, auto& v) { o.run_id = v; }},
      {"role", [&](auto&, auto& v) { o.role = v; }},
      {"rdzv-conf", [&](auto&, auto& v) { parse_rdzv_conf(v, o.rdzv_conf); }},
      {"rdzv-backend", [&](auto&, auto& v) { o.rdzv_backend = v; }},
      {"rdzv-endpoint",
       [&](auto& f, auto& v) { endpoint = v, std::tie(o.rdzv_host, o.rdzv_port) = parse_endpoint(f, v, 29400); }},
      {"local-addr", [&](auto&, auto& v) { o.local_addr = v; }},
      {"monitor-interval", [&](auto& f, auto& v) { o.monitor_interval_s = parse_seconds(f, v); }},
      {"grace-period", [&](auto& f, auto& v) { o.grace_period_s = parse_seconds(f, v); }},
      {"signals-to-handle", [&](auto& f, auto& v) { o.signals_to_handle = parse_signals(f, v); }},
      {"local-ranks-filter", [&](auto& f, auto& v) { o.local_ranks_filter = parse_rank_list(f, v); }},
  };
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // PROGRAM
    const size_t eq = a.find('=');
    const std::string written = a.substr(0, eq);
    const std::string name = canonical(written);
    if (name == "help" || name == "standalone" || name == "no-python") {
      if (eq != std::string::npos) throw LaunchUsageError(written + " takes no value");
      if (name == "help") o.help = true;
      if (name == "standalone") o.standalone = true;
      continue;  // --no-python: ddprun always runs PROGRAM itself
    }
    auto it = valued.find(name);
    if (it == valued.end()) {
      if (const auto why = kTorchrunOnly.find(name); why != kTorchrunOnly.end())
        throw LaunchUsageError(written + ": torchrun's flag, not supported by ddprun: " + why->second);
      throw LaunchUsageError(written + ": unknown flag (ddprun --help lists them)");
    }
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) throw LaunchUsageError(written + " needs a value");
      value = args[++i];
    }
    it->second(written, value);
  }
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  if (!elastic(o) && !endpoint.empty())
    std::tie(o.master_addr, o.master_port) = parse_endpoint("--rdzv-endpoint", endpoint, o.master_port);
  if (o.monitor_interval_s <= 0) throw LaunchUsageError("--monitor-interval must be > 0 seconds");
  validate(o);
  return o;
}

std::string launch_usage() {
  return "usage: ddprun [flags] [--] PROGRAM [ARGS...]\n"
         "  Starts --nproc-per-node copies of PROGRAM with torchrun's worker environment (RANK, LOCAL_RANK,\n"
         "  WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*).\n"
         "  Flags take --flag=value or --flag value; '-' and '_' are interchangeable. Each flag is torchrun's flag of\n"
         "  the same name with torchrun's meaning; a torchrun flag ddprun lacks (--start-method, --module/-m,\n"
         "  --run-path, --logs-specs, --event-log-handler, --numa-binding, --virtual-local-rank,\n"
         "  --duplicate-stdout/stderr-filters) is an error saying what to do instead.\n"
         "  --nnodes N|MIN:MAX         nodes in the job (default 1); a range needs --rdzv-backend c10d\n"
         "  --nproc-per-node N|gpu|cpu|auto\n"
         "                             workers on this node (default 1): gpu = its CUDA devices, cpu = its CPUs,\n"
         "                             auto = GPUs when it has any, else CPUs (torchrun's meaning)\n"
         "  --node-rank R              this node's rank, 0..nnodes-1 (default 0; c10d assigns it)\n"
         "  --master-addr HOST         node 0's address (default 127.0.0.1)\n"
         "  --master-port P            rank 0's store port (default 29500); with --nnodes > 1 node 0's\n"
         "                             ddprun also serves P+1 to coordinate failures and restarts\n"
         "  --standalone               one node on 127.0.0.1 with a free port and a random run id\n"
         "  --max-restarts K           restart all workers up to K times after a failure (default 0)\n"
         "  --log-dir DIR              also write each rank's output to DIR/attempt_K/rank_N.log\n"
         "  --redirects S, -r S        streams that go only to the log files (0 none, 1 stdout, 2 stderr,\n"
         "                             3 both; or per local rank: 0:3,1:2)\n"
         "  --tee S, -t S              streams written to the log files and the console\n"
         "  --rdzv-backend static|c10d static (default): --node-rank and --master-addr on every node; c10d: every\n"
         "                             node runs the same command, meets at --rdzv-endpoint and gets its rank there\n"
         "  --rdzv-endpoint HOST[:PORT] c10d: the host whose ddprun serves the rendezvous (port 29400 by default);\n"
         "                             static: node 0's MASTER_ADDR[:MASTER_PORT]\n"
         "  --run-id ID, --rdzv-id ID  TORCHELASTIC_RUN_ID; c10d: nodes of one job must name the same (default none)\n"
         "  --role NAME                ROLE_NAME (default default)\n"
         "  --rdzv-conf K=V,...        join_timeout (or timeout; default 600 s): how long nodes wait for each\n"
         "                             other; c10d also: last_call_timeout (30 s: a round with MIN nodes waits this\n"
         "                             long for more), close_timeout (30 s), read_timeout (60 s), keep_alive_interval\n"
         "                             (5 s), keep_alive_max_attempt (3: keep-alives missed before a node is lost),\n"
         "                             is_host (serve the endpoint's store here or not; default: when HOST is here)\n"
         "  --local-addr ADDR          c10d: how the other nodes reach this one (default: the address that routes to\n"
         "                             the endpoint); rank 0's node is MASTER_ADDR\n"
         "  --monitor-interval S       how often ddprun checks its workers and the other nodes (default 0.1 s)\n"
         "  --grace-period S           SIGTERM to SIGKILL when stopping workers (default 30 s)\n"
         "  --signals-to-handle LIST   signals forwarded to the workers (default\n"
         "                             SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1; SIGUSR2 also allowed)\n"
         "  --local-ranks-filter LIST  only these local ranks' output on the console (log files keep all)\n"
         "  --no-python                accepted for torchrun compatibility (PROGRAM is always run directly)\n"
         "Rank 0 writes to the console as is; other ranks' lines are prefixed [rank N]. If a worker fails,\n"
         "ddprun stops the others (SIGTERM, then SIGKILL), names the rank and shows its last lines.\n"
         "A handled signal is forwarded to the workers and ends the job; SIGUSR1 (a scheduler's time limit ahead)\n"
         "makes ddptrain checkpoint and exit 75, and ddprun exit 75 without a restart, for a requeue.\n"
         "With --nnodes MIN:MAX (c10d) a lost node makes the others stop their workers and meet again; with at\n"
         "least MIN nodes the workers restart at the new world size (a failure: counts against --max-restarts).\n"
         "A node that arrives while the job runs waits; if there is room (MAX), the workers checkpoint at the next\n"
         "step (SIGUSR1) and restart with it (not a failure).\n";
}

}  // namespace ddp
