// connect_backend: builds a process group's backend under a watchdog, so a rank that cannot connect ends every rank
// promptly.
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ddp {

// How connect_backend watches: a store client of its own (one TCPStore client serialises calls, and Gloo's waits
// hold the main one), or null; this rank and the world; whether this process serves the store (rank 0 without a
// launcher's store: its exit takes the store along); the store's address, named when it is lost; and `gone_peers`,
// which names the peers found gone when connecting fails (Gloo's own message names only an address).
struct ConnectWatch {
  c10::intrusive_ptr<c10d::Store> store;
  int64_t rank = 0;
  int64_t world_size = 1;
  bool serves_store = false;
  std::string store_address;
  std::function<std::string(std::chrono::milliseconds)> gone_peers;
};

// A process group's constructor connects every pair of ranks. When one rank fails there (a peer's address is
// unreachable: "Connection refused"), Gloo keeps the others waiting for several times its timeout (measured: 5x
// dist.timeout_s). connect_backend runs `connect` and meanwhile polls `watch.store` from a second thread (every
// 100 ms, 2 ms per rank in larger worlds): the failing rank posts its error there before throwing it (with a hint,
// see below), and waits until every rank has read it where its exit takes the store along; every other rank sees
// it, or sees the store vanish with rank 0, and exits at once with one "[rank R] error: ..." line, as it does when
// `timeout` passes without the group connecting.
c10::intrusive_ptr<c10d::Backend> connect_backend(const std::function<c10::intrusive_ptr<c10d::Backend>()>& connect,
                                                  const ConnectWatch& watch, std::chrono::milliseconds timeout);

// For a Gloo connection error ("connect [addr]:port: Connection refused", "Connect timeout"), what to check:
// which address each rank publishes and GLOO_SOCKET_IFNAME; "" for any other message.
std::string gloo_connect_hint(const std::string& message);

}  // namespace ddp
