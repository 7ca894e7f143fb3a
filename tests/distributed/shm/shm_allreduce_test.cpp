// Shared-memory all-reduce: results against Gloo and against the rank-order sum, fallback, cleanup, failures.
//
// Ranks are threads of this process, each with its own TCPStore client and Gloo group (as init_distributed
// makes them); the segment is shared between them exactly as between processes.
#include "distributed/rendezvous.h"
#include "distributed/shm/shm_allreduce.h"
#include "tests/support/counting_store.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <dirent.h>
#include <unistd.h>

#include <map>
#include <thread>

namespace ddp::test {
namespace {

using c10d::ReduceOp;

// Rank `rank` of `world`, LOCAL_RANK and LOCAL_WORLD_SIZE as given (0: unset), GROUP_WORLD_SIZE unset (as under
// mpirun, whose nodes may hold different numbers of ranks).
DistContext join_node(int rank, int world, int port, const std::string& allreduce, double timeout_s, int local_rank,
                      int local_world) {
  std::map<std::string, std::string> env{{"RANK", std::to_string(rank)},
                                         {"WORLD_SIZE", std::to_string(world)},
                                         {"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(port)}};
  if (local_world > 0) {
    env["LOCAL_RANK"] = std::to_string(local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
  }
  RendezvousInfo info = rendezvous_from_env(env);
  DistConfig cfg;
  cfg.backend = BackendChoice::Gloo;
  cfg.allreduce = *parse_choice<AllreducePath>(allreduce);
  cfg.timeout_s = timeout_s;
  return init_distributed(info, cfg);
}

// Rank `rank` of `world`, in nodes of `per_node` ranks (torchrun's numbering; 0: LOCAL_WORLD_SIZE unset).
DistContext join(int rank, int world, int port, const std::string& allreduce, double timeout_s = 60.0,
                 int per_node = 0) {
  return join_node(rank, world, port, allreduce, timeout_s, per_node > 0 ? rank % per_node : 0, per_node);
}

// Runs fn(rank) on `world` threads; returns each rank's exception message ("" when none).
std::vector<std::string> on_ranks(int world, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = std::string("rank ") + std::to_string(r) + ": " + e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// Through a ProcessGroup (as training does) or straight through a c10d::Backend.
template <typename Group>
at::Tensor allreduce(Group& group, at::Tensor t, ReduceOp::RedOpType op = ReduceOp::SUM) {
  std::vector<at::Tensor> v{t};
  c10d::AllreduceOptions o;
  o.reduceOp = ReduceOp(op);
  group.allreduce(v, o)->wait();
  return t;
}

struct Case {
  at::ScalarType dtype;
  int64_t n;
  ReduceOp::RedOpType op;
};

// 1 MiB slots hold 262144 floats: sizes around that cross piece boundaries; 17 leaves ranks without a share. Up to
// 256 KiB (65536 floats) an all-reduce is small (one barrier, every rank reduces all of it): every type and
// reduction goes both ways.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t n : {0, 1, 15, 17, 1000, 65536, 65537, 262144, 262145, 600001})
    out.push_back({at::kFloat, n, ReduceOp::SUM});
  for (auto t : {at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kByte})
    for (int64_t n : {1001, 300007}) out.push_back({t, n, ReduceOp::SUM});
  for (auto op : {ReduceOp::MAX, ReduceOp::MIN, ReduceOp::PRODUCT})
    for (int64_t n : {1001, 70001}) out.push_back({at::kFloat, n, op});
  return out;
}

// Rank r's input for case c: deterministic, different on every rank.
at::Tensor input(int rank, size_t c, const Case& k) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 * rank + c + 1);
  if (at::isFloatingType(k.dtype)) return at::randn({k.n}, gen, at::kFloat).to(k.dtype);
  return at::randint(0, 100, {k.n}, gen, at::kLong).to(k.dtype);
}

// op(x, y) computed here with ATen, as reduce_ranks does (std::max and std::min keep x on ties).
at::Tensor reduced(const at::Tensor& x, const at::Tensor& y, ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM:
      return x + y;
    case ReduceOp::PRODUCT:
      return x * y;
    case ReduceOp::MAX:
      return at::where(x < y, y, x);
    default:
      return at::where(y < x, y, x);
  }
}

// ((x0 op x1) op x2) ... computed here with ATen.
at::Tensor rank_order(int world, size_t c, const Case& k) {
  at::Tensor acc = input(0, c, k);
  for (int r = 1; r < world; ++r) acc = reduced(acc, input(r, c, k), k.op);
  return acc;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(ShmAllreduce, TwoRanksEqualGlooBitForBitAndTheRankOrderResult) {
  const int shm_port = free_port(), gloo_port = free_port();
  const auto all = cases();
  std::vector<std::vector<at::Tensor>> got(2);
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext shm = join(rank, 2, shm_port, "shm");
    DistContext gloo = join(rank, 2, gloo_port, "gloo");
    ASSERT_EQ(shm.allreduce, "shm");
    ASSERT_EQ(gloo.allreduce, "gloo");
    for (size_t c = 0; c < all.size(); ++c) {
      at::Tensor through_shm = allreduce(*shm.group, input(rank, c, all[c]), all[c].op);
      // Every case, bfloat16 too (Gloo in 1.13 had no bfloat16 all-reduce; 2.11's has).
      at::Tensor through_gloo = allreduce(*gloo.group, input(rank, c, all[c]), all[c].op);
      EXPECT_TRUE(same_bits(through_shm, through_gloo)) << "case " << c << " rank " << rank;
      got[static_cast<size_t>(rank)].push_back(through_shm);
    }
  }));
  ASSERT_EQ(got[0].size(), all.size());
  ASSERT_EQ(got[1].size(), all.size());
  for (size_t c = 0; c < all.size(); ++c) {
    EXPECT_TRUE(same_bits(got[0][c], got[1][c])) << "case " << c;
    EXPECT_TRUE(same_bits(got[0][c], rank_order(2, c, all[c]))) << "case " << c;
  }
}

TEST(ShmAllreduce, ThreeRanksHoldTheSameBitsTheRankOrderResult) {
  const int port = free_port();
  const auto all = cases();
  std::vector<std::vector<at::Tensor>> got(3);
  expect_no_errors(on_ranks(3, [&](int rank) {
    DistContext ctx = join(rank, 3, port, "shm");
    for (size_t c = 0; c < all.size(); ++c)
      got[static_cast<size_t>(rank)].push_back(allreduce(*ctx.group, input(rank, c, all[c]), all[c].op));
  }));
  for (size_t c = 0; c < all.size(); ++c) {
    const at::Tensor expected = rank_order(3, c, all[c]);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(got[static_cast<size_t>(r)].size(), all.size());
      EXPECT_TRUE(same_bits(got[static_cast<size_t>(r)][c], expected)) << "case " << c << " rank " << r;
    }
  }
}

// Rank r's input whose sums (and minima, maxima) every type holds exactly: integers in [-30, 30], at most 6 of them
// summed (|sum| <= 180 < 256, bfloat16's last exact integer), so any order of reduction gives the same bits.
at::Tensor exact_input(int rank, size_t c, const Case& k) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5000 * rank + c + 7);
  return at::randint(-30, 31, {k.n}, gen, at::kLong).to(k.dtype);
}

// How far two orders of reducing `world` ranks' inputs of case c may part, elementwise: each order's result is within
// (world - 1) u of the exact one, relative to the sum of magnitudes for a sum, to the product's magnitude for a
// product (first order; u = eps / 2 of the type every step rounds to, Higham, Accuracy and Stability, 4.2), so
// two orders within (world - 1) eps of each other; integers, minima and maxima are exact in any order.
at::Tensor order_bound(int world, size_t c, const Case& k) {
  at::Tensor magnitude = input(0, c, k).to(at::kDouble).abs();
  for (int r = 1; r < world; ++r) {
    const at::Tensor x = input(r, c, k).to(at::kDouble).abs();
    magnitude = k.op == ReduceOp::PRODUCT ? magnitude * x : magnitude + x;
  }
  if (!at::isFloatingType(k.dtype) || k.op == ReduceOp::MIN || k.op == ReduceOp::MAX) return at::zeros_like(magnitude);
  const double eps = k.dtype == at::kHalf       ? 9.765625e-4
                     : k.dtype == at::kBFloat16 ? 7.8125e-3
                     : k.dtype == at::kFloat    ? 1.1920928955078125e-7
                                                : 2.220446049250313e-16;
  // Results that round into subnormals are off by up to half the smallest subnormal at each step instead.
  const double tiny = k.dtype == at::kHalf ? 5.960464477539063e-8 : k.dtype == at::kDouble ? 4.9e-324 : 1.4e-45;
  return magnitude * ((world - 1) * eps * 1.01) + (world - 1) * tiny;
}

// Rank `rank`'s input of every case all-reduced, every case twice, all issued before any is waited for (queued behind
// each other); the results in issue order.
template <typename Group>
std::vector<at::Tensor> allreduce_every_case_twice(Group& group, int rank) {
  const auto all = cases();
  std::vector<at::Tensor> tensors;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (int round = 0; round < 2; ++round)
    for (size_t c = 0; c < all.size(); ++c) {
      tensors.push_back(input(rank, c, all[c]));
      std::vector<at::Tensor> v{tensors.back()};
      c10d::AllreduceOptions o;
      o.reduceOp = ReduceOp(all[c].op);
      works.push_back(group.allreduce(v, o));
    }
  for (auto& w : works) w->wait();
  return tensors;
}

// Hierarchical all-reduces of `nodes` nodes of 2 ranks (ranks are threads, as above: the nodes share this host, and
// each node's ranks their own segment) and flat Gloo all-reduces of the same inputs, every case, on every rank.
struct HierarchicalRun {
  std::vector<std::vector<at::Tensor>> node_path, gloo, exact_node_path, exact_gloo;  // [rank][case]
};

HierarchicalRun run_hierarchical(int nodes) {
  const int world = 2 * nodes;
  const int hier_port = free_port(), gloo_port = free_port();
  const auto all = cases();
  HierarchicalRun out;
  for (auto* v : {&out.node_path, &out.gloo, &out.exact_node_path, &out.exact_gloo}) v->resize(world);
  expect_no_errors(on_ranks(world, [&](int rank) {
    DistContext hier = join(rank, world, hier_port, "hierarchical", 60.0, 2);
    DistContext gloo = join(rank, world, gloo_port, "gloo", 60.0, 2);
    ASSERT_EQ(hier.allreduce, "hierarchical");
    const auto r = static_cast<size_t>(rank);
    for (size_t c = 0; c < all.size(); ++c) {
      const ReduceOp::RedOpType op = all[c].op;
      out.node_path[r].push_back(allreduce(*hier.group, input(rank, c, all[c]), op));
      out.gloo[r].push_back(allreduce(*gloo.group, input(rank, c, all[c]), op));
      if (op == ReduceOp::PRODUCT) continue;  // products of 6 such integers overflow half's exact range
      out.exact_node_path[r].push_back(allreduce(*hier.group, exact_input(rank, c, all[c]), op));
      out.exact_gloo[r].push_back(allreduce(*gloo.group, exact_input(rank, c, all[c]), op));
    }
  }));
  return out;
}

// Two nodes: each node's ranks in order, then the two node results (a 2-rank all-reduce: op(a, b) == op(b, a)).
TEST(HierarchicalAllreduce, TwoNodesOfTwoRanksHoldTheNodeOrderResultOnEveryRankAndGloosOnExactSums) {
  const auto all = cases();
  const HierarchicalRun run = run_hierarchical(2);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(run.node_path[static_cast<size_t>(r)].size(), all.size()) << "rank " << r;
    ASSERT_EQ(run.exact_node_path[static_cast<size_t>(r)].size(), run.exact_gloo[static_cast<size_t>(r)].size());
  }
  for (size_t c = 0; c < all.size(); ++c) {
    const ReduceOp::RedOpType op = all[c].op;
    const at::Tensor expected = reduced(reduced(input(0, c, all[c]), input(1, c, all[c]), op),
                                        reduced(input(2, c, all[c]), input(3, c, all[c]), op), op);
    for (int r = 0; r < 4; ++r)
      EXPECT_TRUE(same_bits(run.node_path[static_cast<size_t>(r)][c], expected)) << "case " << c << " rank " << r;
  }
  for (int r = 0; r < 4; ++r)
    for (size_t c = 0; c < run.exact_gloo[0].size(); ++c)
      EXPECT_TRUE(same_bits(run.exact_node_path[static_cast<size_t>(r)][c], run.exact_gloo[static_cast<size_t>(r)][c]))
          << "exact case " << c << " rank " << r;
}

// Three nodes: the nodes' ring all-reduce (Gloo's order) ends the same bits on every rank; exact sums equal Gloo's.
TEST(HierarchicalAllreduce, ThreeNodesHoldTheSameBitsOnEveryRankAndGloosOnExactSums) {
  const auto all = cases();
  const HierarchicalRun run = run_hierarchical(3);
  for (int r = 0; r < 6; ++r) {
    const auto& mine = run.node_path[static_cast<size_t>(r)];
    ASSERT_EQ(mine.size(), run.node_path[0].size()) << "rank " << r;
    for (size_t c = 0; c < mine.size(); ++c) {
      EXPECT_TRUE(same_bits(mine[c], run.node_path[0][c])) << "case " << c << " rank " << r;
      // Another order of the same reduction: within what the roundings of two orders can part (order_bound).
      const at::Tensor gap = (mine[c].to(at::kDouble) - run.gloo[static_cast<size_t>(r)][c].to(at::kDouble)).abs();
      EXPECT_TRUE(at::all(gap <= order_bound(6, c, all[c])).item<bool>()) << "case " << c << " rank " << r;
    }
    for (size_t c = 0; c < run.exact_gloo[0].size(); ++c)
      EXPECT_TRUE(same_bits(run.exact_node_path[static_cast<size_t>(r)][c], run.exact_gloo[static_cast<size_t>(r)][c]))
          << "exact case " << c << " rank " << r;
  }
}

// Every case issued twice before any is waited for (queued behind each other on every rank, across nodes and back
// in turn): each ends with the node-order result on every rank.
TEST(HierarchicalAllreduce, QueuedAllreducesInFlightTogetherHoldTheNodeOrderResult) {
  const int port = free_port();
  const auto all = cases();
  expect_no_errors(on_ranks(4, [&](int rank) {
    DistContext ctx = join(rank, 4, port, "hierarchical", 60.0, 2);
    ASSERT_EQ(ctx.allreduce, "hierarchical");
    const std::vector<at::Tensor> tensors = allreduce_every_case_twice(*ctx.group, rank);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const size_t c = i % all.size();
      const ReduceOp::RedOpType op = all[c].op;
      const at::Tensor expected = reduced(reduced(input(0, c, all[c]), input(1, c, all[c]), op),
                                          reduced(input(2, c, all[c]), input(3, c, all[c]), op), op);
      EXPECT_TRUE(same_bits(tensors[i], expected)) << "op " << i << " rank " << rank;
    }
  }));
}

// Nodes of one rank each have nothing to share: "hierarchical" says why on every rank, "auto" keeps Gloo.
// Gloo between nodes has no int16: such an all-reduce is Gloo's refusal on every rank, never a node said to be lost.
TEST(HierarchicalAllreduce, AnInt16AllreduceIsGloosRefusalNotALostNode) {
  const int port = free_port();
  expect_no_errors(on_ranks(4, [&](int rank) {
    DistContext ctx = join(rank, 4, port, "hierarchical", 60.0, 2);
    ASSERT_EQ(ctx.allreduce, "hierarchical");
    try {
      allreduce(*ctx.group, at::ones({8}, at::kShort));
      ADD_FAILURE() << "rank " << rank << ": an int16 all-reduce did not fail";
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()).find("gone or unreachable"), std::string::npos) << e.what();
    }
    at::Tensor t = at::full({8}, rank + 1, at::kFloat);  // the group still works
    allreduce(*ctx.group, t);
    EXPECT_TRUE(at::equal(t, at::full({8}, 10, at::kFloat))) << "rank " << rank;
  }));
}

TEST(HierarchicalAllreduce, NodesOfOneRankAreRefusedNamingTheLayout) {
  const int port = free_port();
  const auto errors = on_ranks(2, [&](int rank) { join(rank, 2, port, "hierarchical", 60.0, 1); });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("dist.allreduce = \"hierarchical\" cannot be used: rank 0: it needs several nodes of several "
                     "ranks each"),
              std::string::npos)
        << e;
  EXPECT_NE(errors[0].find("this job has 2 node(s) of 1 rank(s) in a world of 2"), std::string::npos) << errors[0];
}

// Nodes of 2, 2 and 4 ranks numbered node by node, without GROUP_WORLD_SIZE: each rank's own numbers fit a layout
// (two nodes of 4, or four nodes of 2), but not the same one. Every rank refuses the hierarchical path, naming the
// sizes, instead of two nodes' ranks joining one segment or two ranks leading one node.
TEST(HierarchicalAllreduce, NodesOfDifferentSizesAreRefusedOnEveryRank) {
  const int port = free_port();
  const std::vector<int> local_world{2, 2, 2, 2, 4, 4, 4, 4}, local_rank{0, 1, 0, 1, 0, 1, 2, 3};
  const auto errors = on_ranks(8, [&](int rank) {
    const auto r = static_cast<size_t>(rank);
    join_node(rank, 8, port, "hierarchical", 30.0, local_rank[r], local_world[r]);
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("dist.allreduce = \"hierarchical\" cannot be used: rank 4: LOCAL_WORLD_SIZE 4, rank 0's is 2: "
                     "it needs nodes of the same number of ranks"),
              std::string::npos)
        << e;
}

TEST(ShmAllreduce, QueuedAllreducesCompleteInIssueOrder) {
  const int port = free_port();
  const auto all = cases();
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "shm");
    const std::vector<at::Tensor> tensors = allreduce_every_case_twice(*ctx.group, rank);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const size_t c = i % all.size();
      EXPECT_TRUE(same_bits(tensors[i], rank_order(2, c, all[c]))) << "op " << i;
    }
  }));
}

// With nothing queued, a small all-reduce runs on the caller's thread: its Work is complete when allreduce() returns.
// A large one goes to the worker, and a small one issued behind it waits its turn there (issue order).
TEST(ShmAllreduce, SmallAllreduceRunsOnTheCallersThreadWhenNothingIsQueued) {
  const int port = free_port();
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "shm");
    auto issue = [&](at::Tensor t) {
      std::vector<at::Tensor> v{std::move(t)};
      return ctx.group->allreduce(v, c10d::AllreduceOptions());
    };
    at::Tensor small = at::full({1000}, static_cast<float>(rank + 1));
    auto done_here = issue(small);
    EXPECT_TRUE(done_here->isCompleted());
    EXPECT_TRUE(at::equal(small, at::full({1000}, 3.0f)));
    at::Tensor large = at::full({4 << 20}, static_cast<float>(rank + 1));
    at::Tensor behind = at::full({1000}, static_cast<float>(10 * (rank + 1)));
    auto queued = issue(large);
    auto after = issue(behind);
    after->wait();
    EXPECT_TRUE(queued->isCompleted());  // the worker ran it before the small one behind it
    EXPECT_TRUE(at::equal(large, at::full({4 << 20}, 3.0f)));
    EXPECT_TRUE(at::equal(behind, at::full({1000}, 30.0f)));
  }));
}

TEST(ShmAllreduce, NonContiguousAndBitwiseAllreducesGoThroughGloo) {
  const int port = free_port();
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "shm");
    at::Tensor m = at::arange(12, at::kFloat).reshape({3, 4}).mul(rank + 1);
    at::Tensor t = m.t();  // not contiguous: a flat copy of its memory would be a different tensor
    ASSERT_FALSE(t.is_contiguous());
    allreduce(*ctx.group, t);
    EXPECT_TRUE(at::equal(t, at::arange(12, at::kFloat).reshape({3, 4}).t() * 3));
    at::Tensor bits = at::full({5}, rank == 0 ? 0b1100 : 0b1010, at::kLong);
    allreduce(*ctx.group, bits, ReduceOp::BAND);
    EXPECT_TRUE(at::equal(bits, at::full({5}, 0b1000, at::kLong)));
  }));
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

// The segment's file never has a name in its directory, and rank 0 closes the /proc/<pid>/fd/<fd> way to it once
// every rank answered: nothing is left to open, or to leak (the mappings still work).
TEST(ShmAllreduce, SegmentFileHasNoNameAndClosesOnceEveryRankMappedIt) {
  TempDir dir;
  const int port = free_port();
  std::vector<ShmAllreduceSetup> setups(2);
  std::vector<std::string> seen(2);
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "gloo");
    ShmAllreduceOptions o;
    o.dir = dir.path();
    setups[static_cast<size_t>(rank)] =
        wrap_with_shm_allreduce(ctx.group->getBackend(c10::DeviceType::CPU), ctx.store, o);
    at::Tensor t = at::full({1000}, rank + 1.0f);
    allreduce(*setups[static_cast<size_t>(rank)].backend, t);
    EXPECT_TRUE(at::equal(t, at::full({1000}, 3.0f)));
    EXPECT_TRUE(entries(dir.path()).empty());
    // What rank 0 announced no longer opens once every rank answered: its fd is closed.
    const auto posted = ctx.store->get("ddptrain/shm_allreduce/segment");
    seen[static_cast<size_t>(rank)] = std::string(posted.begin(), posted.end());
  }));
  EXPECT_TRUE(setups[0].active && setups[1].active) << setups[0].reason << setups[1].reason;
  const std::string fd_path = "/proc/" + seen[0].substr(0, seen[0].find('\n'));
  EXPECT_EQ(fd_path.rfind("/proc/" + std::to_string(getpid()) + "/fd/", 0), 0u) << fd_path;
  EXPECT_NE(access(fd_path.c_str(), F_OK), 0) << fd_path << " still open";
}

// The set-up's agreement costs each rank other than 0 the same few store requests whatever the world (rank 0 reads
// every answer and posts the verdict), where every rank reading every answer makes world x world.
TEST(ShmAllreduce, SetUpTakesAFewStoreRequestsPerRank) {
  TempDir dir;
  const int port = free_port();
  constexpr int kWorld = 5;
  std::vector<int64_t> requests(kWorld);
  std::vector<ShmAllreduceSetup> setups(kWorld);
  expect_no_errors(on_ranks(kWorld, [&](int rank) {
    DistContext ctx = join(rank, kWorld, port, "gloo");
    ShmAllreduceOptions o;
    o.dir = dir.path();
    auto store = c10::make_intrusive<CountingStore>(ctx.store);
    setups[static_cast<size_t>(rank)] = wrap_with_shm_allreduce(ctx.group->getBackend(c10::DeviceType::CPU), store, o);
    requests[static_cast<size_t>(rank)] = store->requests();
  }));
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(setups[static_cast<size_t>(r)].active) << setups[static_cast<size_t>(r)].reason;
    // Rank 0: the segment, its answer, every answer, the verdict posted and counted; the others: the segment, their
    // answer, the verdict.
    EXPECT_LE(requests[static_cast<size_t>(r)], r == 0 ? kWorld + 4 : 3) << "rank " << r;
  }
}

TEST(ShmAllreduce, RanksThatCannotOpenRankZerosFileAllKeepGloo) {
  // Rank 1 looks for rank 0's fd in a /proc of its own, as a rank on another host (or pid namespace) would.
  TempDir shm, proc1;
  const int port = free_port();
  std::vector<ShmAllreduceSetup> setups(2);
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "gloo");
    ShmAllreduceOptions o;
    o.dir = shm.path();
    if (rank == 1) o.proc_dir = proc1.path();
    auto& s = setups[static_cast<size_t>(rank)];
    s = wrap_with_shm_allreduce(ctx.group->getBackend(c10::DeviceType::CPU), ctx.store, o);
    EXPECT_EQ(s.backend.get(), ctx.group->getBackend(c10::DeviceType::CPU).get());  // unchanged: Gloo
    at::Tensor t = at::full({10}, rank + 1.0f);
    allreduce(*s.backend, t);
    EXPECT_TRUE(at::equal(t, at::full({10}, 3.0f)));
  }));
  for (const auto& s : setups) {
    EXPECT_FALSE(s.active);
    EXPECT_NE(s.reason.find("rank 1: cannot open " + proc1.path() + "/" + std::to_string(getpid()) + "/fd/"),
              std::string::npos)
        << s.reason;
  }
  EXPECT_TRUE(entries(shm.path()).empty());
}

TEST(ShmAllreduce, UnusableDirectoryKeepsGlooNamingRankZero) {
  const int port = free_port();
  std::vector<ShmAllreduceSetup> setups(2);
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "gloo");
    ShmAllreduceOptions o;
    o.dir = "/nonexistent/ddptrain-test";
    setups[static_cast<size_t>(rank)] =
        wrap_with_shm_allreduce(ctx.group->getBackend(c10::DeviceType::CPU), ctx.store, o);
  }));
  for (const auto& s : setups) {
    EXPECT_FALSE(s.active);
    EXPECT_NE(s.reason.find("rank 0: cannot create an unnamed file in /nonexistent/ddptrain-test/"), std::string::npos)
        << s.reason;
  }
}

// Where rank 0's process serves the store and its refusal ends the job (dist.allreduce = "shm" without a launcher),
// its exit takes the store along: rank 0 returns the refusal only once every rank has read it, so that a rank slow
// to look for the verdict ends with rank 0's reason instead of a lost store.
TEST(ShmAllreduce, ARefusalThatEndsTheJobIsReadByEveryRankBeforeRankZeroReturnsIt) {
  const int port = free_port();
  auto outage = std::make_shared<Outage>();
  std::vector<ShmAllreduceSetup> setups(3);
  expect_no_errors(on_ranks(3, [&](int rank) {
    DistContext ctx = join(rank, 3, port, "gloo");
    ShmAllreduceOptions o;
    o.dir = "/nonexistent/ddptrain-test";
    o.wait_for_readers_of_refusal = rank == 0;
    auto store = c10::make_intrusive<CountingStore>(ctx.store, outage);
    if (rank == 2) store->delay_reads_of("ddptrain/shm_allreduce/verdict", std::chrono::milliseconds(400));
    setups[static_cast<size_t>(rank)] = wrap_with_shm_allreduce(ctx.group->getBackend(c10::DeviceType::CPU), store, o);
    if (rank == 0) outage->set(Outage::State::kGone);  // rank 0 ends the job, and its store with it
  }));
  for (const auto& s : setups) {
    EXPECT_FALSE(s.active);
    EXPECT_NE(s.reason.find("rank 0: cannot create an unnamed file in /nonexistent/ddptrain-test/"), std::string::npos)
        << s.reason;
  }
}

TEST(ShmAllreduce, APeerThatNeverArrivesTimesOutNamingIt) {
  const int port = free_port();
  std::string rank0_error, rank1_error;
  double rank0_waited = 0, rank1_waited = 0;
  expect_no_errors(on_ranks(2, [&](int rank) {
    DistContext ctx = join(rank, 2, port, "shm", /*timeout_s=*/2.0);
    at::Tensor t = at::ones({100});
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(4));  // misses rank 0's all-reduce
    const auto start = std::chrono::steady_clock::now();
    std::string error = error_of([&] { allreduce(*ctx.group, t); });
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (rank == 0 ? rank0_error : rank1_error) = error;
    (rank == 0 ? rank0_waited : rank1_waited) = waited;
  }));
  EXPECT_NE(
      rank0_error.find("shared-memory all-reduce: rank 1 did not reach the all-reduce within dist.timeout_s = 2 s"),
      std::string::npos)
      << rank0_error;
  EXPECT_GE(rank0_waited, 1.9);
  EXPECT_LT(rank0_waited, 4.0);
  // The late rank learns at once that rank 0 gave up, instead of waiting out its own timeout.
  EXPECT_NE(rank1_error.find("rank 0 gave up"), std::string::npos) << rank1_error;
  EXPECT_LT(rank1_waited, 1.0);
}

}  // namespace
}  // namespace ddp::test
