// ddprun's flag value parsers: each checks one value's form and range and names the flag when it does not fit.
#include "launcher/flag_values.h"

#include <cctype>
#include <map>
#include <sstream>

namespace ddp {

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

std::pair<int64_t, int64_t> parse_nnodes(const std::string& v) {
  const size_t colon = v.find(':');
  const int64_t min = parse_integer("--nnodes", v.substr(0, colon), 1, 1 << 20);
  const int64_t max = colon == std::string::npos ? min : parse_integer("--nnodes", v.substr(colon + 1), 1, 1 << 20);
  if (min > max) throw LaunchUsageError("--nnodes=" + v + ": MIN is larger than MAX");
  return {min, max};
}

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

RendezvousConf parse_rdzv_conf(const std::string& v, RendezvousConf conf) {
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
  return conf;
}

}  // namespace ddp
