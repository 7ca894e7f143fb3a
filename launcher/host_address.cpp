// Addresses of this machine: is_this_host, local_address_towards and free_port.
#include "launcher/host_address.h"

#include "distributed/tcp_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>

namespace ddp {
namespace {

socklen_t length_of(const sockaddr* a) { return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

}  // namespace

bool is_this_host(const std::string& host) {
  if (host == "localhost") return true;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && host == name) return true;
  std::set<std::string> mine;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  for (ifaddrs* i = list; i; i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
      mine.insert(numeric_address(i->ifa_addr, length_of(i->ifa_addr)));
  mine.erase(kNoAddress);
  freeifaddrs(list);
  try {
    const AddressList found = resolve_address(host, 0, SOCK_STREAM);
    for (addrinfo* a = found.get(); a; a = a->ai_next) {
      const std::string addr = numeric_address(a->ai_addr, a->ai_addrlen);
      if (mine.count(addr) || addr.rfind("127.", 0) == 0 || addr == "::1") return true;
    }
  } catch (const std::exception&) {
  }
  return false;
}

std::string local_address_towards(const std::string& host, int port) {
  const AddressList found = resolve_address(host, port, SOCK_DGRAM);
  for (addrinfo* a = found.get(); a; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    const bool ok =
        connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    close(fd);
    const std::string addr = ok ? numeric_address(reinterpret_cast<sockaddr*>(&local), len) : kNoAddress;
    if (addr != kNoAddress) return addr;
  }
  throw std::runtime_error("no route from this machine to " + host);
}

int free_port(const std::string& addr) {
  const AddressList found = resolve_address(addr, 0, SOCK_STREAM);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  const bool ok = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  if (!ok) throw std::runtime_error("could not find a free port on " + addr + ": " + std::strerror(error));
  const auto* b = reinterpret_cast<const sockaddr*>(&bound);
  return ntohs(b->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(b)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(b)->sin_port);
}

}  // namespace ddp
