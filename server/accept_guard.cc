// The server's accept4() (see accept_guard.h).
#include "server/accept_guard.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

std::atomic<PeerConnections*> g_table{nullptr};

// The system call itself (what the C library's accept4 makes), so that nothing needs looking up.
int SystemAccept4(int listener, sockaddr* address, socklen_t* length, int flags) {
  return static_cast<int>(syscall(SYS_accept4, listener, address, length, flags));
}

// A warning at most every 10 s while connections are refused, with the counts so far.
void WarnRefused(PeerConnections& table, const std::string& peer) {
  static std::atomic<int64_t> last_warned_s{-1000};
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
  int64_t last = last_warned_s.load();
  if (now_s - last < 10 || !last_warned_s.compare_exchange_strong(last, now_s)) return;
  const PeerConnectionStats s = table.stats();
  const PeerConnectionLimits limits = table.limits();
  spdlog::warn("refusing connections (last from {}): {} open, at most {} per peer "
               "(--max_connections_per_peer) and {} in all (--max_connections); refused so far "
               "{} over the per-peer limit, {} over the total",
               peer.empty() ? "?" : peer, s.open, limits.per_peer, limits.total,
               s.refused_peer, s.refused_total);
}

}  // namespace

void InstallAcceptGuard(PeerConnections* table) { g_table.store(table, std::memory_order_release); }

}  // namespace gpucompute

extern "C" int accept4(int listener, sockaddr* address, socklen_t* length, int flags) {
  const socklen_t room = length != nullptr ? *length : 0;
  for (;;) {
    if (length != nullptr) *length = room;
    const int fd = gpucompute::SystemAccept4(listener, address, length, flags);
    gpucompute::PeerConnections* table = gpucompute::g_table.load(std::memory_order_acquire);
    if (fd < 0 || table == nullptr || table->Admit(fd)) return fd;
    gpucompute::WarnRefused(*table, gpucompute::PeerConnections::PeerOf(fd));
    close(fd);  // over a limit: refused; take the next pending connection, if any
  }
}
