// A second, plaintext gRPC port that serves grpc.health.v1 only, so that Kubernetes' gRPC
// probes (which speak neither TLS nor tokens) work when the service port needs both.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"

namespace gpucompute {

// The host part of a gRPC listening address ("0.0.0.0:50051" -> "0.0.0.0", "[::]:50051" ->
// "::"; "unix:/path" -> "127.0.0.1"): the metrics and health ports listen there.
std::string HostOfAddress(const std::string& address);

// Listens on host:port (0 picks a free port, written to *bound_port) with the default health
// service, NOT_SERVING until its HealthCheckService says otherwise. (gRPC's reflection plugin,
// once initialised, adds reflection to every server of the process: it describes the API only.)
// Sets `server`'s health (overall and "gpucompute.v1.Compute"); no effect for null.
void SetHealth(grpc::Server* server, bool serving);

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& host, int port,
                                                                int* bound_port);

}  // namespace gpucompute
