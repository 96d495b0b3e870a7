// A second, plaintext gRPC port that serves grpc.health.v1 only, so that Kubernetes' gRPC
// probes (which speak neither TLS nor tokens) work when the service port needs both.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpucompute {

// The host part of a gRPC listening address ("0.0.0.0:50051" -> "0.0.0.0", "[::]:50051" ->
// "::"; "unix:/path" -> "127.0.0.1"): the metrics and health ports listen there.
std::string HostOfAddress(const std::string& address);

// Listens on host:port (0 picks a free port, written to *bound_port) with the default health
// service, NOT_SERVING until its HealthCheckService says otherwise. (gRPC's reflection plugin,
// once initialised, adds reflection to every server of the process: it describes the API only.)
// The serving status of a server's health services (overall and "gpucompute.v1.Compute", on
// the service port and on the health port), set from any thread: by the one-process server
// and by the worker-mode front. Thread-safe.
class HealthStatus {
 public:
  // The servers whose health services it sets (either may be null); borrowed until Close().
  void Attach(grpc::Server* server, grpc::Server* health_server);
  // No effect once closed; until Attach, remembered for it.
  void Set(bool serving);
  // NOT_SERVING for good (shutdown: probes see it while calls drain); detaches the servers.
  void Close();

 private:
  absl::Mutex mu_;
  grpc::Server* server_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::Server* health_server_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& host, int port,
                                                                int* bound_port);

}  // namespace gpucompute
