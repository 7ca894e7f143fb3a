// The rendezvous's join: every rank publishes its view of the job, waits for the others, and a rank that never comes,
// a view that differs, or a rank gone during start-up is one error line naming the rank(s) and host(s).
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// What a rank publishes at rendezvous (key ddptrain/view/<rank>).
struct RankView {
  int64_t world_size = 0;
  std::string libtorch;  // TORCH_VERSION of the build
  std::string config;    // digest of the rank's whole config (overrides included)
  std::string host;
  int64_t pid = 0;
  // The process table its pid is a number in: the kernel's boot id and the pid namespace (/proc/self/ns/pid); ""
  // when unknown. Ranks in two containers of one host, or of two hosts with one hostname, see other processes under
  // the same numbers.
  std::string pid_namespace;
  uint64_t start_time = 0;  // the process's start (process_start_time), telling it from a later one with its pid
};

std::string view_text(const RankView& v);
// "host h, pid 123", of one view and of each
std::string place_of(const RankView& v);
std::vector<std::string> places_of(const std::vector<RankView>& views);
// Parses what a rank published; false when it is not a view (too long, fields missing or malformed).
bool parse_view(const std::string& text, RankView& out);
// "" when two ranks agree; else one line naming both ranks, their hosts and the first field that differs.
std::string view_mismatch(int64_t rank_a, const RankView& a, int64_t rank_b, const RankView& b);

// This process's view: world_size, LibTorch version, hostname, pid, its pid namespace and start, and
// `config_digest`.
RankView own_view(int64_t world_size, const std::string& config_digest);

struct JoinPlace {
  int64_t rank = 0;
  int64_t world_size = 1;
  // Ranks per node (torchrun numbering: node = rank / local_world_size); 0: nodes differ, no node is named.
  int64_t local_world_size = 1;
  std::string address;  // the store's host:port, for messages
  bool serves_store = false;  // this process serves the store: its exit ends it
};

// Publishes `mine`, then waits until every rank of the world published a view: rank 0 compares each with its own
// and posts the verdict, which the others wait for (a few store requests per rank whatever the world). Throws
// std::runtime_error with one line: a view differs (naming both ranks and hosts), two processes of one rank, ranks
// missing after `timeout` (by number, and node), the store lost while waiting, or what rank 0 found (it posts its
// verdict so that every rank reports the same culprit; where it serves the store, it throws only once every rank that
// arrived has read it, or after a few seconds).
// Returns the views of ranks 0..min(world, 256)-1, kept so that a later failure can name a gone peer even when rank
// 0 (and its store) is the one gone.
std::vector<RankView> join_ranks(const c10::intrusive_ptr<c10d::Store>& store, const JoinPlace& place,
                                 const RankView& mine, std::chrono::milliseconds timeout);

// Whether the process of `v` is one this process can see by its pid (the same pid namespace of the same boot).
bool pid_visible(const RankView& v);
// Whether that process still runs: its pid is there, neither a zombie nor another process started since.
bool rank_process_alive(const RankView& v);

// The ranks whose process this one sees (pid_visible, of `views`) and is gone: "rank 2 (host h, pid 123) exited", ""
// when none is known to be after polling for up to `settle` (a killed peer's connections reset before its process is
// gone).
std::string gone_ranks(const std::vector<RankView>& views, int64_t self, std::chrono::milliseconds settle);

}  // namespace ddp
