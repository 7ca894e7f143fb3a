// Addresses of this machine as the rendezvous needs them: is a host this one, which local address reaches a host,
// and a free port.
#pragma once

#include <string>

namespace ddp {

// Whether `host` names this machine: localhost, a loopback address, this machine's host name, or an address that one
// of its interfaces holds (torchrun's _matches_machine_hostname, with the interfaces' own addresses).
bool is_this_host(const std::string& host);

// The local address this machine's routes would use to reach host:port (a connected UDP socket; nothing is sent).
// Throws std::runtime_error naming host when it does not resolve or no route leads there.
std::string local_address_towards(const std::string& host, int port);

// A TCP port nothing listens on at `addr` now (the kernel's pick; another process may take it before it is used).
int free_port(const std::string& addr);

}  // namespace ddp
