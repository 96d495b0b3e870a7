// The /metrics HTTP endpoint: a cpp-httplib listener on its own threads that answers
// GET /metrics with a Registry's text exposition (and GET / with a pointer to it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace gpucompute::metrics {

class Registry;

class MetricsServer {
 public:
  // Listens on `host`:`port` (port 0 picks a free one; see port()). `registry` is borrowed
  // and must outlive the server, as must whatever its callbacks capture. UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port,
                                                             const Registry* registry);
  // The same, serving what `expose` returns at each scrape (it runs on the endpoint's threads;
  // what it captures must outlive the server).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port,
                                                             std::function<std::string()> expose);
  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

  // Closes the listener and waits for its threads (a scrape in progress finishes first).
  // Idempotent.
  void Stop();

 private:
  MetricsServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace gpucompute::metrics
