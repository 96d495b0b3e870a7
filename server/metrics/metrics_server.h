// The /metrics HTTP endpoint: a libmicrohttpd daemon that answers GET /metrics with a
// Registry's text exposition (and GET / with a pointer to it). One thread serves every
// connection from an epoll loop, so a client that sends its request a byte at a time holds
// nothing but its own connection: scrapes go on. Connections are bounded (64 in all, 8 per
// address) and dropped after 10 s without a byte.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace gpucompute::metrics {

class Registry;

class MetricsServer {
 public:
  // Listens on `host`:`port` (port 0 picks a free one; see port()). `registry` is borrowed
  // and must outlive the server, as must whatever its callbacks capture. UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port,
                                                             const Registry* registry);
  // The same, serving what `expose` returns at each scrape (it runs on the endpoint's thread;
  // what it captures must outlive the server).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port,
                                                             std::function<std::string()> expose);
  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

  // Closes the listener and waits for its thread (a scrape in progress finishes first).
  // Idempotent.
  void Stop();

 private:
  MetricsServer() = default;

  std::function<std::string()> expose_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace gpucompute::metrics
