// TCP helpers of the rendezvous: wait_for_listener (polls until something accepts) and listen_on (a store's socket).
#pragma once

#include <chrono>
#include <string>

namespace ddp {

// True once a connection to host:port succeeds; false when `timeout` passes first. Tries every ~10 ms. (c10d's TCPStore
// client sleeps a whole second after each refused connection; waiting here first saves that second when the workers
// start before the store.)
bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout);

// A listening socket bound to the first address `host` resolves to here (127.0.0.1 for MASTER_ADDR=127.0.0.1), never
// to every interface, for c10d::TCPStoreOptions::masterListenFd (the store takes it over). Throws std::runtime_error
// naming host, address and port ("port in use", "not an address of this host").
int listen_on(const std::string& host, int port);

}  // namespace ddp
