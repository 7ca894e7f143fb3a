// ddprun's job store across nodes: a TCPStore on master_port + 1 with round barriers and failure/stop keys.
#include "launcher/store.h"

#include "base/first_line.h"
#include "launcher/bounded_store.h"
#include "distributed/sealed_store/sealed_store.h"
#include "distributed/tcp_probe.h"
#include "launcher/host_address.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <sstream>
#include <thread>

namespace ddp {
namespace {

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

std::string job_signature(const LaunchOptions& o) {
  const std::string nodes =
      std::to_string(o.min_nodes) + (o.min_nodes == o.nnodes ? "" : ":" + std::to_string(o.nnodes));
  return "--nnodes=" + nodes + " --max-restarts=" + std::to_string(o.max_restarts) + " --run-id=" + o.run_id;
}

// The client a JobStore talks through: sealed with the job's secret (when there is one), and every request bounded by
// --rdzv-conf read_timeout (a wait for a key, the store's timeout on top), so that a node whose store went silent
// ends its round as one that lost it instead of waiting on TCP.
c10::intrusive_ptr<c10d::Store> job_client(c10::intrusive_ptr<c10d::Store> tcp, const std::string& secret,
                                           const std::string& address, const LaunchOptions& o) {
  if (!secret.empty()) tcp = c10::make_intrusive<SealedStore>(secret, tcp, address);
  return c10::make_intrusive<BoundedStore>(
      std::move(tcp), std::chrono::milliseconds(static_cast<int64_t>(o.rdzv_conf.read_timeout * 1000)),
      "--rdzv-conf read_timeout");
}

}  // namespace

JobStore::JobStore(const LaunchOptions& o, const std::string& secret)
    : nnodes_(o.nnodes),
      node_rank_(o.node_rank),
      agent_id_(o.node_rank),
      local_world_size_(o.nproc_per_node),
      timeout_s_(o.rdzv_conf.join_timeout),
      serves_(o.node_rank == 0) {
  const int port = o.master_port + 1;
  address_ = o.master_addr + ":" + std::to_string(port);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = o.node_rank == 0;
  opts.numWorkers = static_cast<size_t>(o.nnodes);
  opts.waitWorkers = false;
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.rdzv_conf.join_timeout * 1000));
  auto unreachable = [&](const std::string& why) {
    return std::runtime_error("node " + std::to_string(o.node_rank) + " could not reach node 0's ddprun at " +
                              address_ + " within " + std::to_string(static_cast<int64_t>(o.rdzv_conf.join_timeout)) +
                              " s: " + why);
  };
  if (!opts.isServer && !wait_for_listener(o.master_addr, port, opts.timeout))
    throw unreachable("nothing accepted connections there");
  try {
    // On --master-addr's address only (TCPStore alone would listen on every interface).
    if (opts.isServer) opts.masterListenFd = listen_on(o.master_addr, port);
    store_ = job_client(c10::make_intrusive<c10d::TCPStore>(o.master_addr, opts), secret, address_, o);
  } catch (const std::exception& e) {
    if (opts.isServer)
      throw std::runtime_error("node 0 cannot serve ddprun's store on port " + std::to_string(port) +
                               " (--master-port + 1): " + first_line(e.what()));
    throw unreachable(first_line(e.what()));
  }
}

std::unique_ptr<JobStore> JobStore::at_endpoint(const LaunchOptions& o, const std::string& secret) {
  std::unique_ptr<JobStore> s(new JobStore());
  s->nnodes_ = o.min_nodes;
  s->timeout_s_ = o.rdzv_conf.join_timeout;
  s->address_ = o.rdzv_host + ":" + std::to_string(o.rdzv_port);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(o.rdzv_port);
  opts.waitWorkers = false;
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.rdzv_conf.read_timeout * 1000));
  const bool here = o.rdzv_conf.is_host == 1 || (o.rdzv_conf.is_host == -1 && is_this_host(o.rdzv_host));
  if (here) {
    try {
      opts.masterListenFd = listen_on(o.rdzv_host, o.rdzv_port);
      opts.isServer = true;
    } catch (const std::exception& e) {
      // Another ddprun of this machine serves it (torchrun's c10d backend tries the same way), unless told to serve.
      if (o.rdzv_conf.is_host == 1)
        throw std::runtime_error("cannot serve the rendezvous at " + s->address_ + ": " + first_line(e.what()));
    }
  }
  if (!opts.isServer &&
      !wait_for_listener(o.rdzv_host, o.rdzv_port,
                         std::chrono::milliseconds(static_cast<int64_t>(o.rdzv_conf.join_timeout * 1000))))
    throw std::runtime_error("could not reach the rendezvous at " + s->address_ + " within " +
                             std::to_string(static_cast<int64_t>(o.rdzv_conf.join_timeout)) +
                             " s (--rdzv-conf join_timeout): nothing accepted connections there");
  try {
    s->store_ = job_client(c10::make_intrusive<c10d::TCPStore>(o.rdzv_host, opts), secret, s->address_, o);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot " + std::string(opts.isServer ? "serve" : "reach") + " the rendezvous at " +
                             s->address_ + ": " + first_line(e.what()));
  }
  s->serves_ = opts.isServer;
  s->agent_id_ = s->add("agents", 1) - 1;
  s->set("joined/" + std::to_string(s->agent_id_), "1");
  return s;
}

JobStore::~JobStore() = default;

std::string JobStore::address() const { return address_; }

void JobStore::set_membership(int64_t nnodes, int64_t node_rank) {
  nnodes_ = nnodes;
  node_rank_ = node_rank;
}

int64_t JobStore::add(const std::string& name, int64_t delta) { return store_->add(key(name), delta); }

void JobStore::set(const std::string& name, const std::string& value) { store_->set(key(name), bytes(value)); }

std::optional<std::string> JobStore::get_if_set(const std::string& name) {
  if (!store_->check({key(name)})) return std::nullopt;
  return text(store_->get(key(name)));
}

std::string JobStore::get(const std::string& name) { return text(store_->get(key(name))); }

std::string JobStore::set_once(const std::string& name, const std::string& value) {
  return text(store_->compareSet(key(name), {}, bytes(value)));
}

void JobStore::check_same_job(const LaunchOptions& o) {
  if (elastic(o)) {
    const std::string expected = set_once("job", job_signature(o));
    if (expected != job_signature(o))
      throw LaunchUsageError("this node was started with " + job_signature(o) + " but the job at " + address_ +
                             " with " + expected);
    return;
  }
  const std::string node = std::to_string(node_rank_);
  if (store_->add(key("joined/" + node), 1) > 1) {
    throw LaunchUsageError("a second ddprun joined as --node-rank=" + node);
  }
  if (node_rank_ == 0) {
    store_->set(key("job"), bytes(job_signature(o)));
    return;
  }
  const std::string expected = text(store_->get(key("job")));  // waits for node 0 (store timeout)
  if (expected != job_signature(o)) {
    throw LaunchUsageError("node " + node + " was started with " + job_signature(o) + " but node 0 with " + expected);
  }
}

bool JobStore::all_nodes_have(const std::string& name_prefix, int64_t first_node) {
  std::vector<std::string> keys;
  for (int64_t n = first_node; n < nnodes_; ++n) keys.push_back(key(name_prefix + std::to_string(n)));
  return keys.empty() || store_->check(keys);
}

std::string JobStore::join_round(int64_t round, const std::function<bool()>& interrupted) {
  const std::string prefix = "round/" + std::to_string(round) + "/ready/";
  store_->set(key(prefix + std::to_string(node_rank_)), bytes(std::to_string(local_world_size_)));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  while (!all_nodes_have(prefix, 0)) {
    if (auto why = stopped()) return *why;
    if (interrupted()) return "interrupted";
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream missing;
      for (int64_t n = 0; n < nnodes_; ++n)
        if (!store_->check({key(prefix + std::to_string(n))})) missing << (missing.tellp() > 0 ? ", " : "") << n;
      throw std::runtime_error("timed out after " + std::to_string(static_cast<int64_t>(timeout_s_)) +
                               " s waiting for node(s) " + missing.str() + " to " +
                               (round == 0 ? "start" : "restart (round " + std::to_string(round) + ")") +
                               " (--rdzv-conf timeout=S)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

std::vector<int64_t> JobStore::local_world_sizes(int64_t round) {
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n < nnodes_; ++n)
    sizes.push_back(std::stoll(get("round/" + std::to_string(round) + "/ready/" + std::to_string(n))));
  return sizes;
}

std::optional<std::string> JobStore::failure(int64_t round) {
  return get_if_set("round/" + std::to_string(round) + "/failed");
}

void JobStore::report_failure(int64_t round, const std::string& what) {
  const std::string name = "round/" + std::to_string(round) + "/failed";
  if (!store_->check({key(name)})) store_->set(key(name), bytes(what));
}

std::optional<std::string> JobStore::stopped() { return get_if_set("stopped"); }

void JobStore::report_stopped(const std::string& why) {
  if (!store_->check({key("stopped")})) store_->set(key("stopped"), bytes(why));
}

void JobStore::report_done(int64_t round) {
  store_->set(key("round/" + std::to_string(round) + "/done/" + std::to_string(node_rank_)), bytes("1"));
}

bool JobStore::all_done(int64_t round) { return all_nodes_have("round/" + std::to_string(round) + "/done/", 0); }

void JobStore::leave() { store_->set(key("left/" + std::to_string(agent_id_)), bytes("1")); }

void JobStore::wait_for_others_to_leave(const std::vector<int64_t>& agents, double timeout_s,
                                        const std::function<bool()>& interrupted) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto someone_still_here = [&] {
    for (const int64_t a : agents)
      if (a != agent_id_ && store_->check({key("joined/" + std::to_string(a))}) &&
          !store_->check({key("left/" + std::to_string(a))}))
        return true;
    return false;
  };
  while (someone_still_here() && !interrupted() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace ddp
