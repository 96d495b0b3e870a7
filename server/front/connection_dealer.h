// Worker mode's connection handoff, the front's end (`--worker_connections=handoff`,
// docs/server.md "Worker mode"): the front listens on the service port itself and hands every
// connection it accepts to a serving worker, round robin, which serves it whole (its calls no
// longer pass through the front). Plaintext only: the worker adds the descriptor to its gRPC
// server as it is (handed_connections.h).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/front/worker_pool.h"

namespace gpucompute::front {

class ConnectionDealer {
 public:
  // Listens on `address` (HOST:PORT; port 0 picks a free one) and starts dealing to `pool`,
  // which must outlive this object. UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ConnectionDealer>> Start(const std::string& address,
                                                                  WorkerPool* pool);
  ~ConnectionDealer();  // Stop()
  ConnectionDealer(const ConnectionDealer&) = delete;
  ConnectionDealer& operator=(const ConnectionDealer&) = delete;

  int port() const { return port_; }
  // Closes the port (connections already handed stay with their workers) and joins the thread.
  void Stop();

 private:
  ConnectionDealer(int listener, int wake, int port, WorkerPool* pool)
      : listener_(listener), wake_(wake), port_(port), pool_(pool) {}
  void Run();

  int listener_;
  int wake_;  // an eventfd: Stop() wakes the accept loop
  const int port_;
  WorkerPool* const pool_;
  std::thread thread_;
};

}  // namespace gpucompute::front
