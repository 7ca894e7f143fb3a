// TCP helpers of the rendezvous: wait_for_listener (polls until something accepts), listen_on (a store's socket) and
// the address lookups they and the launcher share.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>

struct addrinfo;

namespace ddp {

// getaddrinfo's answers for host:port of one socket type (any address family), freed with the object. Throws
// std::runtime_error "cannot resolve HOST: why".
using AddressList = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;
AddressList resolve_address(const std::string& host, int port, int socktype);

// What numeric_address gives for a socket address that has no numeric form.
inline constexpr char kNoAddress[] = "?";
// An address in numeric form ("10.0.0.1", "::1"); kNoAddress when it has none.
std::string numeric_address(const sockaddr* a, socklen_t len);

// True once a connection to host:port succeeds; false when `timeout` passes first. Tries every ~10 ms. (c10d's TCPStore
// client sleeps a whole second after each refused connection; waiting here first saves that second when the workers
// start before the store.)
bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout);

// A listening socket bound to the first address `host` resolves to here (127.0.0.1 for MASTER_ADDR=127.0.0.1), never
// to every interface, for c10d::TCPStoreOptions::masterListenFd (the store takes it over). Throws std::runtime_error
// naming host, address and port ("port in use", "not an address of this host").
int listen_on(const std::string& host, int port);

}  // namespace ddp
