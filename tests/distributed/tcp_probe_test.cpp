// Tests: wait_for_listener notices a listener within milliseconds and gives up at its deadline.
#include "distributed/tcp_probe.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Listens on 127.0.0.1:port until destroyed.
struct Listener {
  explicit Listener(int port) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 4) == 0;
  }
  ~Listener() { close(fd); }
  int fd = -1;
  bool ok = false;
};

TEST(TcpProbe, GivesUpAtTheDeadlineWhenNothingListens) {
  const int port = test::free_port();
  const auto start = Clock::now();
  EXPECT_FALSE(wait_for_listener("127.0.0.1", port, std::chrono::milliseconds(300)));
  const double waited = seconds_since(start);
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 5.0);
}

TEST(TcpProbe, UnknownHostIsNotReachable) {
  EXPECT_FALSE(wait_for_listener("no-such-host.invalid", 29500, std::chrono::milliseconds(100)));
}

// The store's port opens 200 ms after the worker starts waiting: found well before the one-second retry that c10d's
// TCPStore client would sleep after the refused connection.
TEST(TcpProbe, FindsAListenerThatAppearsLater) {
  const int port = test::free_port();
  std::unique_ptr<Listener> listener;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    listener = std::make_unique<Listener>(port);
  });
  const auto start = Clock::now();
  const bool found = wait_for_listener("127.0.0.1", port, std::chrono::milliseconds(10000));
  const double waited = seconds_since(start);
  late.join();
  ASSERT_TRUE(listener && listener->ok);
  EXPECT_TRUE(found);
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 0.9);
}

}  // namespace
}  // namespace ddp
