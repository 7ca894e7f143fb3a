// Rendezvous: env parsing, TCPStore with a bounded join barrier that names missing ranks, Gloo/NCCL groups.
#include "distributed/rendezvous.h"

#include "base/first_line.h"
#include "distributed/group_connect.h"
#include "distributed/launcher_hint.h"
#include "distributed/placement.h"
#include "distributed/rank_views.h"
#include "distributed/sealed_store/sealed_store.h"
#include "distributed/slurm_master.h"
#include "base/seconds_text.h"
#include "distributed/shm/shm_allreduce.h"
#include "distributed/tcp_probe.h"

#include "distributed/process_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef DDP_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/cuda.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace {

// The largest world ddptrain accepts: 64 Ki ranks (a bigger or wrapped-around WORLD_SIZE is a typo, and rank 0
// would wait for that many ranks). Ranks, local ranks and node ranks are bounded by it too.
constexpr int64_t kMaxWorldSize = 65536;

int64_t parse_int(const std::map<std::string, std::string>& env, const std::string& name, int64_t lo = 0,
                  int64_t hi = kMaxWorldSize - 1) {
  const std::string& v = env.at(name);
  long long x = -1;
  try {
    size_t used = 0;
    x = std::stoll(v, &used);
    if (used != v.size() || x < 0) throw std::invalid_argument(v);
  } catch (const std::exception&) {
    throw std::runtime_error("environment variable " + name + "=\"" + v + "\" is not a non-negative integer");
  }
  if (x < lo || x > hi)
    throw std::runtime_error("environment variable " + name + "=" + v + " is out of range [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
  return x;
}

bool has(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  return it != env.end() && !it->second.empty();
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// GLOO_SOCKET_IFNAME's comma-separated interfaces, as torch.distributed reads them.
std::vector<std::string> gloo_interfaces() {
  std::vector<std::string> names;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (!ifname) return names;
  std::stringstream list(ifname);
  std::string name;
  while (std::getline(list, name, ','))
    if (!name.empty()) names.push_back(name);
  return names;
}

// The variables a scheduler sets for each process it starts, where torchrun's are absent.
struct SchedulerVariables {
  const char *source, *rank, *size, *local_rank, *local_size, *node;
};
constexpr SchedulerVariables kSchedulers[] = {
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"},
};

// The first scheduler whose rank and size are both set; null when none is.
const SchedulerVariables* scheduler_of(const std::map<std::string, std::string>& env) {
  for (const SchedulerVariables& v : kSchedulers)
    if (has(env, v.rank) && has(env, v.size)) return &v;
  return nullptr;
}

// The store's address and port: MASTER_ADDR and MASTER_PORT when set; under Slurm the node list's first host and the
// job id's port stand in for unset ones (as Lightning's SLURMEnvironment does). Throws, naming the launcher and how to
// set them there, when an address or port is still missing.
void set_master(RendezvousInfo& info, const std::map<std::string, std::string>& env) {
  const bool slurm = info.source == "slurm";
  std::string addr_origin = "MASTER_ADDR", port_origin = "MASTER_PORT";
  if (has(env, "MASTER_ADDR")) {
    info.master_addr = env.at("MASTER_ADDR");
  } else if (slurm) {
    const SlurmFirstHost first = slurm_first_host(env);
    info.master_addr = first.host;
    addr_origin = "first host of " + first.variable;
  }
  if (has(env, "MASTER_PORT")) {
    info.master_port = static_cast<int>(parse_int(env, "MASTER_PORT", 1, 65535));
  } else if (slurm) {
    info.master_port = slurm_job_port(env);
    port_origin = has(env, "SLURM_JOB_ID") ? "port from SLURM_JOB_ID" : "port 12910 without SLURM_JOB_ID";
  }
  const bool addr = !info.master_addr.empty(), port = info.master_port > 0;
  if (!addr || !port) {
    const std::string missing = !addr && !port ? "environment variables MASTER_ADDR and MASTER_PORT are"
                                : !addr        ? "environment variable MASTER_ADDR is"
                                               : "environment variable MASTER_PORT is";
    throw std::runtime_error(missing + " required for a world of " + std::to_string(info.world_size) + " (rank " +
                             std::to_string(info.rank) + "; launcher: " + launcher_name(info.source, env) +
                             "): " + master_address_hint(info.source, env));
  }
  info.master_origin =
      addr_origin == "MASTER_ADDR" && port_origin == "MASTER_PORT" ? addr_origin : addr_origin + ", " + port_origin;
}

}  // namespace

bool cuda_build() {
#ifdef DDP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

RendezvousInfo rendezvous_from_env(const std::map<std::string, std::string>& env) {
  RendezvousInfo info;
  if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
    if (!has(env, "RANK") || !has(env, "WORLD_SIZE"))
      throw std::runtime_error(std::string("environment variable ") + (has(env, "RANK") ? "WORLD_SIZE" : "RANK") +
                               " is missing (RANK and WORLD_SIZE come together, as torchrun sets them)");
    info.source = "torchrun";
    info.rank = parse_int(env, "RANK");
    info.world_size = parse_int(env, "WORLD_SIZE", 1, kMaxWorldSize);
    info.local_rank = has(env, "LOCAL_RANK") ? parse_int(env, "LOCAL_RANK") : info.rank;
    info.local_world_size =
        has(env, "LOCAL_WORLD_SIZE") ? parse_int(env, "LOCAL_WORLD_SIZE", 1, kMaxWorldSize) : info.world_size;
    info.group_rank = has(env, "GROUP_RANK") ? parse_int(env, "GROUP_RANK") : 0;
    info.group_world_size = has(env, "GROUP_WORLD_SIZE") ? parse_int(env, "GROUP_WORLD_SIZE", 1, kMaxWorldSize) : 0;
  } else if (const SchedulerVariables* vars = scheduler_of(env)) {
    info.source = vars->source;
    info.rank = parse_int(env, vars->rank);
    info.world_size = parse_int(env, vars->size, 1, kMaxWorldSize);
    info.local_rank = has(env, vars->local_rank) ? parse_int(env, vars->local_rank) : 0;
    info.local_world_size = has(env, vars->local_size) ? parse_int(env, vars->local_size, 1, kMaxWorldSize) : 1;
    info.group_rank = has(env, vars->node) ? parse_int(env, vars->node) : 0;
  } else {
    return info;
  }
  info.present = true;
  const std::string prefix = info.source == "torchrun" ? "" : info.source + ": ";
  if (info.rank >= info.world_size)
    throw std::runtime_error(prefix + "rank " + std::to_string(info.rank) + " is out of range for world size " +
                             std::to_string(info.world_size));
  if (info.local_rank >= std::max<int64_t>(info.local_world_size, 1) && info.local_world_size > 0 &&
      info.source == "torchrun" && has(env, "LOCAL_WORLD_SIZE"))
    throw std::runtime_error("LOCAL_RANK=" + std::to_string(info.local_rank) +
                             " is out of range for LOCAL_WORLD_SIZE=" + std::to_string(info.local_world_size));
  if (info.world_size > 1) set_master(info, env);
  auto agent = env.find("TORCHELASTIC_USE_AGENT_STORE");
  info.agent_store = agent != env.end() && lower(agent->second) == "true";
  if (has(env, "DDPTRAIN_JOB_SECRET")) {
    info.job_secret = env.at("DDPTRAIN_JOB_SECRET");
    if (const std::string problem = job_secret_problem(info.job_secret); !problem.empty())
      throw std::runtime_error("environment variable DDPTRAIN_JOB_SECRET " + problem);
  }
  if (has(env, "TORCHELASTIC_RESTART_COUNT"))
    info.restart_count = parse_int(env, "TORCHELASTIC_RESTART_COUNT", 0, int64_t{1} << 40);
  return info;
}

namespace {

c10d::TCPStoreOptions rendezvous_store_options(const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(info.master_port);
  opts.isServer = info.rank == 0 && !info.agent_store;
  opts.numWorkers = static_cast<size_t>(info.world_size);
  opts.waitWorkers = false;  // join_barrier waits instead and can name who is missing
  opts.timeout = timeout;
  return opts;
}

// As torch.distributed's env:// rendezvous: an agent's store outlives restarts, so each attempt gets its own key
// space (stale join keys and Gloo addresses of the previous attempt stay out of the way).
c10::intrusive_ptr<c10d::Store> open_rendezvous_store(const RendezvousInfo& info, const c10d::TCPStoreOptions& o) {
  const std::string address = info.master_addr + ":" + std::to_string(info.master_port);
  c10::intrusive_ptr<c10d::Store> tcp = c10::make_intrusive<c10d::TCPStore>(info.master_addr, o);
  if (!info.job_secret.empty()) tcp = c10::make_intrusive<SealedStore>(info.job_secret, tcp, address);
  if (!info.agent_store) return tcp;
  return c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(info.restart_count), tcp);
}

// Rank 0 serves the store on MASTER_ADDR's address only (TCPStore alone would listen on every interface); the
// others connect. Failures name the rank, the address and the likely cause.
c10::intrusive_ptr<c10d::Store> connect_rendezvous_store(const RendezvousInfo& info, c10d::TCPStoreOptions& opts,
                                                         double timeout_s) {
  const std::string address = info.master_addr + ":" + std::to_string(info.master_port);
  auto unreachable = [&](const std::string& why) {
    return std::runtime_error("rank " + std::to_string(info.rank) + ": could not reach the store at " + address +
                              " within " + seconds_text(std::chrono::duration<double>(timeout_s)) +
                              " s (is rank 0 running?): " + why);
  };
  if (!opts.isServer && !wait_for_listener(info.master_addr, info.master_port, opts.timeout))
    throw unreachable("nothing accepted connections there");
  try {
    if (opts.isServer) opts.masterListenFd = listen_on(info.master_addr, info.master_port);
    return open_rendezvous_store(info, opts);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string first = first_line(what);
    if (opts.isServer)
      throw std::runtime_error(
          "rank 0: cannot serve the store on " + address + ": " + first +
          (what.find("in use") != std::string::npos ? " (port in use? pick another MASTER_PORT)" : ""));
    throw unreachable(first);
  }
}

// The watchdog's own client: one TCPStore client serialises calls, and Gloo's waits hold it. Null when it cannot
// connect (then only the deadline is watched).
c10::intrusive_ptr<c10d::Store> open_watch_store(const RendezvousInfo& info, const c10d::TCPStoreOptions& opts) {
  try {
    c10d::TCPStoreOptions client = opts;
    client.isServer = false;
    client.masterListenFd.reset();
    return open_rendezvous_store(info, client);
  } catch (const std::exception&) {
    return {};
  }
}

// Nodes may run different numbers of ranks (torchrun numbers each node's after the nodes before it); a rank's node is
// rank / LOCAL_WORLD_SIZE only when every node runs as many as this one, as far as the node count tells.
bool nodes_alike(const RendezvousInfo& info) {
  return info.group_world_size == 0 || info.group_world_size * info.local_world_size == info.world_size;
}

// Where each rank sits among the nodes, by torchrun's numbering (RANK = node * LOCAL_WORLD_SIZE + LOCAL_RANK).
NodePlace node_place(const RendezvousInfo& info) {
  NodePlace p;
  p.local_world = static_cast<int>(std::max<int64_t>(info.local_world_size, 1));
  p.local_rank = static_cast<int>(info.local_rank);
  p.node = static_cast<int>(info.rank / p.local_world);
  p.nodes = static_cast<int>(info.world_size / p.local_world);
  // Nodes of different sizes, or a world that is no multiple of this node's: no numbering to go by.
  if (!nodes_alike(info) || info.world_size % p.local_world != 0) p.nodes = 0;
  return p;
}

// The gloo backend's slots: CPU tensors through shared memory when dist.allreduce allows and every rank is on this
// host; else, with several nodes of several ranks, through shared memory within each node and Gloo between them;
// else Gloo. CUDA tensors over Gloo (several ranks on one GPU, where NCCL refuses them).
std::vector<BackendSlot> gloo_side_slots(DistContext& ctx, const RendezvousInfo& info, const DistConfig& cfg,
                                         const c10::intrusive_ptr<c10d::Backend>& gloo,
                                         const c10::intrusive_ptr<c10d::Store>& store,
                                         std::chrono::milliseconds timeout) {
  ctx.allreduce = "gloo";
  c10::intrusive_ptr<c10d::Backend> cpu = gloo;
  ShmAllreduceOptions shm;
  shm.timeout = timeout;
  const NodePlace place = node_place(info);
  const bool several_nodes_of_several = place.nodes > 1 && place.local_world > 1;
  if (cfg.allreduce == AllreducePath::Auto || cfg.allreduce == AllreducePath::Shm) {
    shm.wait_for_readers_of_refusal = ctx.serves_store && cfg.allreduce == AllreducePath::Shm;
    auto setup = wrap_with_shm_allreduce(gloo, store, shm);
    if (!setup.active && cfg.allreduce == AllreducePath::Shm)
      throw std::runtime_error("dist.allreduce = \"shm\" but shared memory cannot be used: " + setup.reason +
                               " (every rank must be on one host; use \"auto\" or \"gloo\")");
    cpu = setup.backend;
    ctx.allreduce = setup.active ? "shm" : "gloo";
    ctx.allreduce_note = setup.reason;
  }
  // "auto" tries it on every rank whenever shared memory does not join them all (a rank's own numbers cannot tell
  // whether every rank sees nodes of several ranks: under mpirun nodes may differ in size); wrapping is collective and
  // ends the same on every rank.
  const bool hierarchical = cfg.allreduce == AllreducePath::Hierarchical ||
                            (cfg.allreduce == AllreducePath::Auto && cpu == gloo && info.world_size > 1);
  if (hierarchical) {
    const auto across = [&](const c10::intrusive_ptr<c10d::Store>& under, int node, int nodes) {
      return make_gloo_backend(under, node, nodes, timeout, gloo_interfaces());
    };
    shm.wait_for_readers_of_refusal = ctx.serves_store && cfg.allreduce == AllreducePath::Hierarchical;
    auto setup = wrap_with_hierarchical_allreduce(gloo, store, shm, place, across);
    if (!setup.active && cfg.allreduce == AllreducePath::Hierarchical)
      throw std::runtime_error("dist.allreduce = \"hierarchical\" cannot be used: " + setup.reason +
                               " (use \"auto\" or \"gloo\")");
    cpu = setup.backend;
    ctx.allreduce = setup.active ? "hierarchical" : "gloo";
    if (setup.active)
      ctx.allreduce_note = "";
    else if (several_nodes_of_several)  // the reason is news only where this rank's numbers promised several
      ctx.allreduce_note += "; within each node: " + setup.reason;
  }
  return {{c10::DeviceType::CPU, cpu == gloo ? "gloo" : "custom", cpu}, {c10::DeviceType::CUDA, "gloo", gloo}};
}

// The nccl backend's slots: CUDA tensors through ProcessGroupNCCL, CPU tensors over Gloo.
std::vector<BackendSlot> nccl_side_slots(DistContext& ctx, const c10::intrusive_ptr<c10d::Backend>& gloo,
                                         const c10::intrusive_ptr<c10d::Store>& prefixed, int rank, int world,
                                         std::chrono::milliseconds timeout) {
  std::vector<BackendSlot> slots;
#ifdef DDP_WITH_CUDA
  // As torchrun sets for its workers (ddprun too; this covers Slurm and mpirun): a collective that fails or outlives
  // dist.timeout_s aborts the communicator and ends the process instead of hanging it.
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto cuda_store = c10::make_intrusive<c10d::PrefixStore>("cuda/", prefixed);
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(cuda_store, rank, world, options);
  nccl->setBoundDeviceId(ctx.device);  // init_process_group(device_id=...): barrier() knows its GPU
  nccl->setSequenceNumberForGroup();
  slots.push_back({c10::DeviceType::CUDA, "nccl", nccl});
  slots.push_back({c10::DeviceType::CPU, "gloo", gloo});
  ctx.allreduce = "nccl";
#endif
  return slots;
}

}  // namespace

DistContext init_distributed(const RendezvousInfo& info, const DistConfig& cfg) {
  DistContext ctx;
  ctx.rank = info.rank;
  ctx.world_size = info.world_size;
  ctx.local_rank = info.local_rank;
  ctx.local_world_size = info.local_world_size;
  ctx.group_rank = info.group_rank;

  const Placement placement = choose_placement(cfg, info.local_rank, info.local_world_size, cuda_build(),
                                               cuda_build() ? static_cast<int64_t>(torch::cuda::device_count()) : 0);
  const std::string backend = placement.backend;
  ctx.device = placement.device;
  // torch.cuda.set_device(LOCAL_RANK): allocations, cuBLAS handles and NCCL's communicator on this rank's GPU.
  if (ctx.device.is_cuda()) c10::impl::getDeviceGuardImpl(ctx.device.type())->setDevice(ctx.device);
  ctx.backend = info.world_size > 1 ? backend : "none";
  if (info.world_size > 1)
    ctx.rendezvous = info.master_addr + ":" + std::to_string(info.master_port) + " (" + info.master_origin + ")";
  if (info.world_size <= 1) return ctx;

  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000));
  const std::string address = info.master_addr + ":" + std::to_string(info.master_port);
  c10d::TCPStoreOptions opts = rendezvous_store_options(info, timeout);
  c10::intrusive_ptr<c10d::Store> store = connect_rendezvous_store(info, opts, cfg.timeout_s);
  JoinPlace place;
  place.rank = info.rank;
  place.world_size = info.world_size;
  place.local_world_size = nodes_alike(info) ? info.local_world_size : 0;
  place.address = address;
  place.serves_store = opts.isServer;
  const auto views = join_ranks(store, place, own_view(info.world_size, info.config_digest), timeout);
  ctx.gone_peers = [views, self = info.rank](std::chrono::milliseconds settle) {
    return gone_ranks(views, self, settle);
  };
  ctx.views = views;
  ctx.store = store;
  ctx.serves_store = opts.isServer;
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  const c10::intrusive_ptr<c10d::Store> watch = open_watch_store(info, opts);
  const int rank = static_cast<int>(info.rank);
  const int world = static_cast<int>(info.world_size);
  // CPU collectives (metrics, found_inf of CPU runs, the gloo backend's gradients) always run on Gloo, as with
  // torch.distributed's "cpu:gloo,cuda:nccl"; with nccl, CUDA tensors go through ProcessGroupNCCL. Each backend
  // keeps its keys under its device's prefix, as _new_process_group_helper does ("cpu/", "cuda/").
  auto cpu_store = c10::make_intrusive<c10d::PrefixStore>("cpu/", prefixed);
  ConnectWatch connect_watch;
  connect_watch.store = watch;
  connect_watch.rank = info.rank;
  connect_watch.world_size = info.world_size;
  connect_watch.serves_store = opts.isServer;
  connect_watch.store_address = address;
  connect_watch.gone_peers = ctx.gone_peers;
  auto gloo = connect_backend([&] { return make_gloo_backend(cpu_store, rank, world, timeout, gloo_interfaces()); },
                              connect_watch, timeout);
  const std::vector<BackendSlot> slots = backend == "gloo" ? gloo_side_slots(ctx, info, cfg, gloo, store, timeout)
                                                           : nccl_side_slots(ctx, gloo, prefixed, rank, world, timeout);
  ctx.group = make_process_group(prefixed, rank, world, slots);
  ctx.activity = std::make_shared<Activity>(collectives_started(ctx.group));
  ctx.watch_store = watch;
  ctx.member_group = [store, timeout, self = info.rank](const std::vector<int64_t>& members, const std::string& name) {
    const auto at = std::find(members.begin(), members.end(), self);
    if (at == members.end())
      throw std::logic_error("rank " + std::to_string(self) + " makes the group " + name + " it is not a member of");
    auto under = c10::make_intrusive<c10d::PrefixStore>("member_group/" + name, store);
    return make_gloo_backend(under, static_cast<int>(at - members.begin()), static_cast<int>(members.size()), timeout,
                             gloo_interfaces());
  };
  return ctx;
}

}  // namespace ddp
