// The front's accept loop of the connection handoff (see connection_dealer.h).
#include "server/front/connection_dealer.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"
#include "server/transport/health_port.h"
#include "spdlog/spdlog.h"

namespace gpucompute::front {
namespace {

// A listening TCP socket on HOST:PORT ("[::]:0" and "0.0.0.0:50051" alike), with its bound port.
absl::StatusOr<std::pair<int, int>> Listen(const std::string& address) {
  const std::string host = HostOfAddress(address);
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); err != 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on ", address, ": ", gai_strerror(err)));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("could not listen on ", address, ": ", why));
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::make_pair(fd, bound_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionDealer>> ConnectionDealer::Start(const std::string& address,
                                                                          WorkerPool* pool) {
  absl::StatusOr<std::pair<int, int>> listening = Listen(address);
  if (!listening.ok()) return listening.status();
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(listening->first);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<ConnectionDealer> d(new ConnectionDealer(listening->first, wake, listening->second, pool));
  d->thread_ = std::thread([raw = d.get()] { raw->Run(); });
  return d;
}

ConnectionDealer::~ConnectionDealer() { Stop(); }

void ConnectionDealer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof(one));
    thread_.join();
  }
  if (listener_ >= 0) close(listener_);
  if (wake_ >= 0) close(wake_);
  listener_ = wake_ = -1;
}

void ConnectionDealer::Run() {
  NameThisThread("gc-dealer");
  pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("connection handoff: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    // accept4 is the process's guarded one (accept_guard.h): over a limit it closes the
    // connection itself and returns the next, or EAGAIN.
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        spdlog::warn("connection handoff: accept: {}", std::strerror(errno));
        poll(nullptr, 0, 100);  // no descriptor left: wait rather than spin
      }
      continue;
    }
    // The pool counts what each worker took; with no worker serving, the connection closes.
    (void)pool_->HandConnection(fd);
    close(fd);  // the worker holds its own descriptor for it now
  }
}

}  // namespace gpucompute::front
