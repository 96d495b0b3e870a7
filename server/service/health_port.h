// A second, plaintext gRPC port that serves grpc.health.v1 only, so that Kubernetes' gRPC
// probes (which speak neither TLS nor tokens) work when the service port needs both.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"

namespace gpucompute {

// Listens on host:port (0 picks a free port, written to *bound_port) with the default health
// service, NOT_SERVING until its HealthCheckService says otherwise. (gRPC's reflection plugin,
// once initialised, adds reflection to every server of the process: it describes the API only.)
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& host, int port,
                                                                int* bound_port);

}  // namespace gpucompute
