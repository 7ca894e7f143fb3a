// connect_backend: builds a process group's backend under a watchdog, so a rank that cannot connect ends every rank
// promptly.
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <functional>
#include <string>

namespace ddp {

// A process group's constructor connects every pair of ranks. When one rank fails there (a peer's address is
// unreachable: "Connection refused"), Gloo keeps the others waiting for several times its timeout (measured: 5x
// dist.timeout_s). connect_backend runs `connect` and meanwhile watches `watch` (a store client of its own, or
// null) from a second thread: the failing rank posts its error there before throwing it (with a hint, see
// below); every other rank sees it, or sees the store vanish with rank 0, and exits at once with one
// "[rank R] error: ..." line, as it does when `timeout` passes without the group connecting. `gone_peers` names the
// peers found gone when connecting fails (Gloo's own message names only an address).
c10::intrusive_ptr<c10d::Backend> connect_backend(
    const std::function<c10::intrusive_ptr<c10d::Backend>()>& connect,
    const c10::intrusive_ptr<c10d::Store>& watch, int64_t rank, std::chrono::milliseconds timeout,
    const std::string& store_address, const std::function<std::string(std::chrono::milliseconds)>& gone_peers = {});

// For a Gloo connection error ("connect [addr]:port: Connection refused", "Connect timeout"), what to check:
// which address each rank publishes and GLOO_SOCKET_IFNAME; "" for any other message.
std::string gloo_connect_hint(const std::string& message);

}  // namespace ddp
