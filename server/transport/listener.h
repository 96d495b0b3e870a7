// The service port's gRPC settings, one place for the one-process server and the worker-mode
// front: message limits, concurrent calls per connection, gRPC's memory quota, no compressed
// messages, extra channel arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/transport/health_port.h"

namespace gpucompute {

struct ListenerOptions {
  std::string address;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  int64_t max_receive_bytes = int64_t{1} << 30;
  int64_t max_send_bytes = -1;  // -1: no limit
  int max_concurrent_streams = 1024;
  // Memory gRPC may hold for calls (a ResourceQuota); 0: half of MemoryLimitBytes() (the host's memory, or the container's limit).
  int64_t memory_quota_bytes = 0;
  std::string quota_name = "gpucompute";
  absl::Duration max_connection_idle = absl::ZeroDuration();  // zero: idle connections stay
  // KEY, VALUE; a value that parses as an integer is passed as one.
  std::vector<std::pair<std::string, std::string>> grpc_args;
};

// Adds the listening port (the bound port goes to *port once the server is built) and the
// settings to `builder`.
void AddListener(grpc::ServerBuilder& builder, const ListenerOptions& options, int* port);

// What StartListening started: the service's server and, with a health port, the plaintext
// health server beside it (null otherwise), with their bound ports.
struct Listening {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::unique_ptr<grpc::Server> health_server;
  int health_port = 0;
};

// Builds and starts `builder` (the caller has registered its services) with AddListener's port
// and settings; with health_port >= 0 (0: any free port) starts the health server on the
// address's host too; attaches both to `health`. UNAVAILABLE when the address cannot be bound.
absl::StatusOr<Listening> StartListening(grpc::ServerBuilder& builder, const ListenerOptions& options,
                                         int health_port, HealthStatus& health);

}  // namespace gpucompute
