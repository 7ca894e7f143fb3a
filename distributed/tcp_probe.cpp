// wait_for_listener (polls a TCP address until something accepts), listen_on (a socket bound to one address), and
// the address helpers they share with the launcher (resolve_address, numeric_address).
#include "distributed/tcp_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <memory>
#include <thread>

namespace ddp {
namespace {

// One non-blocking connect attempt to any of the host's addresses, bounded by `budget`.
bool try_connect(const std::string& host, int port, std::chrono::milliseconds budget) {
  AddressList found(nullptr, freeaddrinfo);
  try {
    found = resolve_address(host, port, SOCK_STREAM);
  } catch (const std::runtime_error&) {
    return false;
  }
  bool ok = false;
  for (addrinfo* a = found.get(); a && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(budget.count())) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    close(fd);
  }
  return ok;
}

}  // namespace

AddressList resolve_address(const std::string& host, int port, int socktype) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw std::runtime_error("cannot resolve " + host + ": " + gai_strerror(rc));
  return AddressList(found, freeaddrinfo);
}

std::string numeric_address(const sockaddr* a, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (getnameinfo(a, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return kNoAddress;
  return host;
}

int listen_on(const std::string& host, int port) {
  const AddressList list = resolve_address(host, port, SOCK_STREAM);
  const addrinfo* found = list.get();
  const std::string where =
      host + " (" + numeric_address(found->ai_addr, found->ai_addrlen) + ") port " + std::to_string(port);
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) throw std::runtime_error("cannot make a socket for " + where + ": " + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as TCPStore's own server does
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int e = errno;
    close(fd);
    throw std::runtime_error("cannot listen on " + where + ": " + std::strerror(e) +
                             (e == EADDRNOTAVAIL ? " (not an address of this host)" : ""));
  }
  return fd;
}

bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (try_connect(host, port, std::min(left, std::chrono::milliseconds(1000)))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace ddp
