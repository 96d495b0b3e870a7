// Worker mode (--workers, docs/server.md "Worker mode"): the process clients talk to. It owns the
// listening port (TLS, tokens and quotas, health, metrics) and a pool of worker processes,
// one per GPU, and proxies every call to them (proxy_service.h), or, with
// --worker_connections=handoff, hands each client connection to a worker that serves it
// (connection_dealer.h). A sticky CUDA error ends
// only its worker's process: the front routes around it and starts a new one, so the other
// GPUs keep serving.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/peer_connections.h"
#include "server/front/connection_dealer.h"
#include "server/front/proxy_service.h"
#include "server/front/worker_pool.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_server.h"
#include "server/transport/auth.h"
#include "server/transport/credentials.h"
#include "server/transport/health_port.h"
#include "server/transport/listener_probe.h"
#include "server/transport/security_watch.h"

namespace gpucompute::front {

struct FrontConfig {
  std::string address = "0.0.0.0:50051";
  TlsFiles tls;
  std::string auth_token_file;
  int auth_default_max_in_flight = 64;
  absl::Duration auth_token_reload_interval = absl::Seconds(5);
  int health_port = -1;   // as ServerConfig
  int metrics_port = -1;  // as ServerConfig; workers' metrics are merged in
  int64_t max_request_bytes = int64_t{1} << 30;
  int max_concurrent_streams = 1024;
  int64_t grpc_memory_quota_bytes = 0;  // 0: half of MemoryLimitBytes()
  std::vector<std::pair<std::string, std::string>> grpc_args;
  absl::Duration max_connection_idle = absl::Minutes(5);     // as ServerConfig
  absl::Duration listener_probe_period = absl::Seconds(5);   // as ServerConfig
  WorkerPoolOptions workers;
  std::vector<int> device_index_of_worker;  // the front's GPU index of each worker; -1: none
  PeerConnections* connections = nullptr;     // as ServerConfig
};

class FrontServer {
 public:
  // Starts the workers (waiting until they serve), then listens.
  static absl::StatusOr<std::unique_ptr<FrontServer>> Start(FrontConfig config);
  ~FrontServer();  // Shutdown() with a short grace period if still running

  int port() const { return port_; }
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  int health_port() const { return health_port_; }
  absl::Status ReloadTokens();

  // Stops accepting calls; the calls accepted are routed, then the workers get SIGTERM (they
  // finish their calls and end open Submit streams); waits up to `grace` for everything.
  void Shutdown(absl::Duration grace = absl::Seconds(30));

 private:
  FrontServer() = default;
  // The service port: the front's gRPC proxy (TLS, tokens, quotas), or (handoff mode) the
  // dealer that hands each connection to a worker, with the health port beside either.
  absl::Status StartProxying(const FrontConfig& config, std::shared_ptr<grpc::ServerCredentials> credentials);
  absl::Status StartDealing(const FrontConfig& config);
  std::string Expose() const;

  std::unique_ptr<metrics::Registry> registry_;
  // The front process's own process_* families, merged with the workers' as worker="front".
  std::unique_ptr<metrics::Registry> process_registry_;
  std::unique_ptr<TokenAuthenticator> auth_;
  std::unique_ptr<SecurityWatch> security_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<ProxyService> proxy_;
  // The client port; in handoff mode the internal socket of the workers' relayed calls.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionDealer> dealer_;  // handoff mode: the client port
  std::unique_ptr<grpc::Server> health_server_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  // SERVING while any worker serves and the port accepts; closed when Shutdown begins.
  HealthStatus health_;
  std::atomic<bool> listener_lost_{false};  // set by listener_probe_
  std::unique_ptr<ListenerProbe> listener_probe_;  // stopped first at shutdown
  int port_ = 0;
  int health_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gpucompute::front
