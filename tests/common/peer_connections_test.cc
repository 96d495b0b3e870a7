// PeerConnections on real loopback TCP connections: the per-peer and total limits, another
// peer admitted while one is at its limit, room again once connections close (also when a
// closed connection's descriptor is reused), Unix sockets not counted, limits derived from the
// descriptor limit.
#include "common/peer_connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

// A loopback listener; Connect() opens a connection from `source` (any 127.x.y.z address is
// local) and returns the server side's descriptor, as accept() gives it.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() {
    for (int fd : open_) close(fd);
    close(fd_);
  }

  // {client side, server side}
  std::pair<int, int> Connect(const char* source) {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(bind(c, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port_);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    const int s = accept(fd_, nullptr, nullptr);
    EXPECT_GE(s, 0);
    open_.push_back(c);
    open_.push_back(s);
    return {c, s};
  }
  void Close(int fd) {
    close(fd);
    open_.erase(std::find(open_.begin(), open_.end(), fd));
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> open_;
};

TEST(PeerConnections, OnePeerAtItsLimitLeavesRoomForOthers) {
  Listener listener;
  PeerConnections table(PeerConnectionLimits{3, 0});
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    const int s = listener.Connect("127.0.0.1").second;
    EXPECT_TRUE(table.Admit(s));
    held.push_back(s);
  }
  EXPECT_EQ(PeerConnections::PeerOf(held[0]), "127.0.0.1");
  EXPECT_FALSE(table.Admit(listener.Connect("127.0.0.1").second));
  EXPECT_TRUE(table.Admit(listener.Connect("127.0.0.2").second));
  EXPECT_EQ(table.stats().refused_peer, 1);
  EXPECT_EQ(table.stats().open, 4);
  // A connection closes: its peer has room again.
  listener.Close(held[1]);
  EXPECT_TRUE(table.Admit(listener.Connect("127.0.0.1").second));
  EXPECT_FALSE(table.Admit(listener.Connect("127.0.0.1").second));
}

TEST(PeerConnections, AReusedDescriptorIsNotTheConnectionThatHeldIt) {
  Listener listener;
  PeerConnections table(PeerConnectionLimits{1, 0});
  const auto [client, server] = listener.Connect("127.0.0.1");
  ASSERT_TRUE(table.Admit(server));
  listener.Close(server);
  // The next socket may take the same descriptor number: still a new connection.
  const int next = listener.Connect("127.0.0.1").second;
  EXPECT_TRUE(table.Admit(next));
  EXPECT_EQ(table.stats().open, 1);
}

TEST(PeerConnections, TheTotalBoundsEveryPeerTogether) {
  Listener listener;
  PeerConnections table(PeerConnectionLimits{0, 2});
  const int a = listener.Connect("127.0.0.1").second;
  EXPECT_TRUE(table.Admit(a));
  EXPECT_TRUE(table.Admit(listener.Connect("127.0.0.2").second));
  EXPECT_FALSE(table.Admit(listener.Connect("127.0.0.3").second));
  EXPECT_EQ(table.stats().refused_total, 1);
  listener.Close(a);
  EXPECT_TRUE(table.Admit(listener.Connect("127.0.0.3").second));
}

TEST(PeerConnections, UnixSocketsAreNotCounted) {
  PeerConnections table(PeerConnectionLimits{1, 1});
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_EQ(PeerConnections::PeerOf(pair[0]), "");
  EXPECT_TRUE(table.Admit(pair[0]));
  EXPECT_TRUE(table.Admit(pair[1]));
  EXPECT_EQ(table.stats().open, 0);
  close(pair[0]);
  close(pair[1]);
}

TEST(PeerConnections, DefaultLimitsFollowTheDescriptorLimit) {
  rlimit nofile{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  const PeerConnectionLimits limits = PeerConnections(PeerConnectionLimits{}).limits();
  if (nofile.rlim_cur == RLIM_INFINITY) GTEST_SKIP() << "no descriptor limit";
  const auto n = static_cast<int64_t>(nofile.rlim_cur);
  EXPECT_EQ(limits.per_peer, std::max<int64_t>(1, n / 2));
  EXPECT_EQ(limits.total, std::max<int64_t>(1, n - std::min<int64_t>(256, n / 4)));
  EXPECT_EQ(PeerConnections(PeerConnectionLimits{5, 0}).limits().per_peer, 5);
}

}  // namespace
}  // namespace gpucompute
