// Connections the front hands over (see handed_connections.h).
#include "server/transport/handed_connections.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/server_posix.h>

#include "absl/status/status.h"
#include "common/thread_name.h"
#include "server/transport/descriptor_passing.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

absl::StatusOr<std::unique_ptr<HandedConnections>> HandedConnections::Start(int channel, grpc::Server* server,
                                                                         PeerConnections* table) {
  if (channel < 0 || server == nullptr) {
    return absl::InvalidArgumentError("handed connections need the front's socket and a started server");
  }
  std::unique_ptr<HandedConnections> h(new HandedConnections(channel, server, table));
  h->thread_ = std::thread([raw = h.get()] { raw->Run(); });
  return h;
}

HandedConnections::~HandedConnections() {
  Stop();
  close(channel_);
}

void HandedConnections::Stop() {
  if (!thread_.joinable()) return;
  shutdown(channel_, SHUT_RDWR);  // wakes the receive: it then reports the end
  thread_.join();
}

void HandedConnections::Run() {
  NameThisThread("gc-handoff");
  for (;;) {
    absl::StatusOr<int> fd = ReceiveDescriptor(channel_);
    if (!fd.ok()) {
      if (!absl::IsNotFound(fd.status())) spdlog::error("connection handoff: {}", fd.status().ToString());
      return;  // the front is gone or the server stops: no more connections come
    }
    if (table_ != nullptr && !table_->Admit(*fd)) {
      close(*fd);  // over the per-peer or total limit (the table counts the refusals)
      continue;
    }
    // As gRPC's own listener sets it on the connections it accepts.
    const int one = 1;
    setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    grpc::AddInsecureChannelFromFd(server_, *fd);  // the server owns it from here
  }
}

}  // namespace gpucompute
