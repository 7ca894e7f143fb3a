// c10d rendezvous over the endpoint's store: rounds that close at MIN..MAX nodes, node ranks, keep-alives, scale-up.
#include "launcher/elastic_rendezvous.h"

#include "base/seconds_text.h"
#include "launcher/host_address.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>
#include <tuple>

namespace ddp {
namespace {

std::string r_key(int64_t round, const std::string& name) { return "rdzv/" + std::to_string(round) + "/" + name; }
std::string round_key(int64_t round, const std::string& name) { return "round/" + std::to_string(round) + "/" + name; }

// A member as the store holds it: "ADDR PID AGENT WORKERS".
struct Node {
  std::string addr;
  int64_t pid = 0, agent = 0, workers = 1;
  bool operator<(const Node& other) const {
    return std::tie(addr, pid, agent) < std::tie(other.addr, other.pid, other.agent);
  }
  std::string text() const { return addr + " (pid " + std::to_string(pid) + ")"; }
};

Node parse_node(const std::string& s) {
  Node n;
  std::istringstream in(s);
  in >> n.addr >> n.pid >> n.agent >> n.workers;
  return n;
}

}  // namespace

ElasticRendezvous::ElasticRendezvous(const LaunchOptions& o, JobStore& store)
    : o_(o),
      store_(store),
      local_addr_(o.local_addr.empty() ? local_address_towards(o.rdzv_host, o.rdzv_port) : o.local_addr) {}

std::string ElasticRendezvous::count_key(int64_t round) const { return r_key(round, "count"); }

int64_t ElasticRendezvous::count(int64_t round) {
  const auto v = store_.get_if_set(count_key(round));
  return v ? std::stoll(*v) : 0;
}

// Whether `round` closed and is still running: none of its ends (failure, scale-up, job finished or stopped) is set.
bool ElasticRendezvous::round_running(int64_t round) {
  if (round < 0 || !store_.get_if_set(r_key(round, "closed"))) return false;
  return !store_.get_if_set(round_key(round, "failed")) && !store_.get_if_set(round_key(round, "scale_up")) &&
         !store_.get_if_set("finished") && !store_.stopped();
}

std::optional<Membership> ElasticRendezvous::join(int64_t from_round, const std::function<bool()>& interrupted,
                                                  NoRound* none) {
  const auto forming = store_.get_if_set("rdzv/forming");
  int64_t round = std::max<int64_t>(from_round, forming ? std::stoll(*forming) : 0);
  const std::string me = local_addr_ + " " + std::to_string(getpid()) + " " + std::to_string(store_.agent_id()) + " " +
                         std::to_string(o_.nproc_per_node);
  const auto poll =
      std::chrono::milliseconds(std::clamp<int64_t>(static_cast<int64_t>(o_.monitor_interval_s * 1000), 10, 100));
  for (;; ++round) {
    const int64_t index = store_.add(count_key(round), 1);
    store_.set(r_key(round, "node/" + std::to_string(index)), me);
    auto waiting_since = Clock::now();
    std::optional<Clock::time_point> min_since;
    while (true) {
      if (const auto closed = store_.get_if_set(r_key(round, "closed"))) {
        const int64_t members = std::stoll(*closed);
        if (index <= members) return assemble(round, members, index);
        break;  // it started without this node: wait for the next round
      }
      if (auto stopped = store_.stopped()) {
        *none = {false, *stopped};
        return std::nullopt;
      }
      if (store_.get_if_set("finished")) {
        *none = {true, "the job finished before this node could join it"};
        return std::nullopt;
      }
      if (interrupted()) {
        *none = {false, "interrupted"};
        return std::nullopt;
      }
      const int64_t joined = count(round);
      if (round_running(round - 1)) {
        waiting_since = Clock::now();  // the job runs without this node: it waits for the next round, however long
      } else if (joined >= o_.nnodes) {
        store_.set_once(r_key(round, "closed"), std::to_string(o_.nnodes));
      } else if (joined >= needed(round, waiting_since)) {
        if (!min_since) min_since = Clock::now();
        if (seconds_since(*min_since) >= o_.rdzv_conf.last_call_timeout)
          store_.set_once(r_key(round, "closed"), std::to_string(joined));
      } else if (seconds_since(waiting_since) > o_.rdzv_conf.join_timeout) {
        std::string names;
        for (int64_t i = 1; i <= joined; ++i)
          if (const auto n = store_.get_if_set(r_key(round, "node/" + std::to_string(i))))
            names += (names.empty() ? "" : ", ") + parse_node(*n).text();
        throw std::runtime_error(
            "rendezvous '" + o_.run_id + "' at " + store_.address() + ": " + std::to_string(joined) + " of the " +
            std::to_string(o_.min_nodes) + " node(s) --nnodes " + std::to_string(o_.min_nodes) + ":" +
            std::to_string(o_.nnodes) + " needs joined within " +
            seconds_text(std::chrono::duration<double>(o_.rdzv_conf.join_timeout)) + " s" +
            " (--rdzv-conf join_timeout): " + names + "; " + std::to_string(o_.min_nodes - joined) + " missing");
      }
      std::this_thread::sleep_for(poll);
    }
  }
}

// Nodes `round` waits for before its last call: MIN; after a round that made room for waiting nodes also all of that
// round's members and one more (they are on their way; up to MAX), unless join_timeout passed since it ended.
int64_t ElasticRendezvous::needed(int64_t round, Clock::time_point waiting_since) {
  if (round == 0 || seconds_since(waiting_since) > o_.rdzv_conf.join_timeout ||
      !store_.get_if_set(round_key(round - 1, "scale_up")))
    return o_.min_nodes;
  const auto members = store_.get_if_set(r_key(round - 1, "closed"));
  return std::max<int64_t>(o_.min_nodes, std::min<int64_t>(o_.nnodes, (members ? std::stoll(*members) : 0) + 1));
}

Membership ElasticRendezvous::assemble(int64_t round, int64_t members, int64_t my_index) {
  std::vector<Node> nodes;
  for (int64_t i = 1; i <= members; ++i)
    nodes.push_back(parse_node(store_.get(r_key(round, "node/" + std::to_string(i)))));
  const Node me = nodes[static_cast<size_t>(my_index - 1)];
  std::sort(nodes.begin(), nodes.end());
  Membership m;
  m.round = round;
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r].agent == me.agent) m.node_rank = static_cast<int64_t>(r);
    m.nodes.push_back(nodes[r].text());
    m.agents.push_back(nodes[r].agent);
    m.local_world_sizes.push_back(nodes[r].workers);
  }
  store_.set("rdzv/forming", std::to_string(round + 1));
  if (m.node_rank == 0) store_.set(r_key(round, "master"), local_addr_ + " " + std::to_string(free_port(local_addr_)));
  std::istringstream master(store_.get(r_key(round, "master")));
  master >> m.master_addr >> m.master_port;
  current_ = m;
  has_round_ = true;
  next_keep_alive_ = Clock::now();
  last_keep_alive_.clear();
  return m;
}

bool ElasticRendezvous::keep_alive() {
  if (!has_round_ || Clock::now() < next_keep_alive_) return false;
  const auto interval = std::chrono::milliseconds(static_cast<int64_t>(o_.rdzv_conf.keep_alive_interval * 1000));
  next_keep_alive_ = Clock::now() + interval;
  store_.add(round_key(current_.round, "alive/" + std::to_string(current_.node_rank)), 1);
  return true;
}

std::string ElasticRendezvous::lost_member() {
  if (!keep_alive()) return "";
  const double allowed = o_.rdzv_conf.keep_alive_interval * static_cast<double>(o_.rdzv_conf.keep_alive_max_attempt);
  for (int64_t r = 0; r < current_.nnodes(); ++r) {
    if (r == current_.node_rank) continue;
    const std::string value = store_.get_if_set(round_key(current_.round, "alive/" + std::to_string(r))).value_or("");
    auto it = last_keep_alive_.find(r);
    if (it == last_keep_alive_.end() || it->second.first != value) {
      last_keep_alive_[r] = {value, Clock::now()};
    } else if (seconds_since(it->second.second) > allowed) {
      return "node " + std::to_string(r) + " (" + current_.nodes[static_cast<size_t>(r)] + ") sent no keep-alive for " +
             seconds_text(std::chrono::duration<double>(allowed)) +
             " s (--rdzv-conf keep_alive_interval x keep_alive_max_attempt)";
    }
  }
  return "";
}

std::optional<std::string> ElasticRendezvous::scale_up_decided() {
  if (!has_round_) return std::nullopt;
  return store_.get_if_set(round_key(current_.round, "scale_up"));
}

std::optional<std::string> ElasticRendezvous::scale_up() {
  if (!has_round_) return std::nullopt;
  if (auto why = scale_up_decided()) return why;
  if (current_.node_rank != 0 || current_.nnodes() >= o_.nnodes) return std::nullopt;
  const int64_t waiting = count(current_.round + 1);
  if (waiting == 0) return std::nullopt;
  return store_.set_once(round_key(current_.round, "scale_up"),
                         std::to_string(waiting) + " node(s) waiting to join the " + std::to_string(current_.nnodes()) +
                             " running (--nnodes " + std::to_string(o_.min_nodes) + ":" + std::to_string(o_.nnodes) +
                             ")");
}

void ElasticRendezvous::mark_finished() { store_.set("finished", "1"); }

std::vector<int64_t> ElasticRendezvous::agents_to_wait_for() {
  std::vector<int64_t> agents;
  if (!has_round_) {
    const auto joined = store_.get_if_set("agents");
    const int64_t all = joined ? std::stoll(*joined) : 0;
    for (int64_t a = 0; a < all; ++a) agents.push_back(a);
    return agents;
  }
  agents = current_.agents;
  const int64_t waiting = count(current_.round + 1);
  for (int64_t i = 1; i <= waiting; ++i)
    if (const auto n = store_.get_if_set(r_key(current_.round + 1, "node/" + std::to_string(i))))
      agents.push_back(parse_node(*n).agent);
  return agents;
}

}  // namespace ddp
