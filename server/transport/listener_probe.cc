// The service port's liveness probe (see listener_probe.h).
#include "server/transport/listener_probe.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/transport/health_port.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

std::string ProbeHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0" || host == "*") return "127.0.0.1";
  if (host == "::" || host == "[::]") return "::1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

ProbeResult ProbePort(const std::string& host, int port, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (getaddrinfo(ProbeHost(host).c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return ProbeResult::kUnknown;
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return ProbeResult::kUnknown;  // no descriptor: nothing can be told
  }
  const timeval tv{static_cast<time_t>(absl::ToInt64Seconds(timeout)),
                   static_cast<suseconds_t>(absl::ToInt64Microseconds(timeout) % 1000000)};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  ProbeResult result = ProbeResult::kUnanswered;
  if (connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    (void)send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1) {
      result = ProbeResult::kAccepting;  // bytes, or a close: someone accepted it
    }
  }
  close(fd);
  freeaddrinfo(found);
  return result;
}

std::unique_ptr<ListenerProbe> ListenerProbe::Watch(const std::string& address, int port,
                                                    absl::Duration period, const std::string& what,
                                                    std::function<void()> on_lost) {
  if (period <= absl::ZeroDuration() || absl::StartsWith(address, "unix:")) return nullptr;
  return std::make_unique<ListenerProbe>(
      HostOfAddress(address), port, period, [what, port, on_lost = std::move(on_lost)] {
        spdlog::critical("{} {} no longer accepts connections (gRPC stops accepting when every "
                         "descriptor is taken): health is now NOT_SERVING",
                         what, port);
        on_lost();
      });
}

ListenerProbe::ListenerProbe(std::string host, int port, absl::Duration period,
                             std::function<void()> on_lost)
    : host_(std::move(host)), port_(port), period_(period), on_lost_(std::move(on_lost)) {
  thread_ = std::thread([this] { Run(); });
}

ListenerProbe::~ListenerProbe() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ListenerProbe::Run() {
  constexpr int kMisses = 3;  // unanswered probes in a row that make the port lost
  int misses = 0;
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), period_)) {
    mu_.Unlock();
    const ProbeResult result = ProbePort(host_, port_, period_);
    mu_.Lock();
    if (result == ProbeResult::kAccepting) misses = 0;
    if (result == ProbeResult::kUnanswered) ++misses;
    if (misses >= kMisses && !stopping_) {
      on_lost_();
      return;  // a lost listener does not come back in this process
    }
  }
}

}  // namespace gpucompute
