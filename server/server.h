// Assembles the server: completion threads, backend, scheduler, the Compute service, health
// and reflection, on one listening address, and the Prometheus /metrics endpoint on another
// port. Used by main.cc and by in-process tests.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/server.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/peer_connections.h"
#include "server/transport/handed_connections.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/server_metrics.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/memory_budget.h"
#include "server/runtime/op_schedulers.h"
#include "server/runtime/shared_memory.h"
#include "server/runtime/tensor_store.h"
#include "server/service/idle_streams.h"
#include "server/transport/listener_probe.h"
#include "server/transport/auth.h"
#include "server/service/compute_service.h"
#include "server/transport/credentials.h"
#include "server/transport/health_port.h"
#include "server/transport/security_watch.h"
#include "server/service/service_parts.h"
#include "server/service/limits.h"
#include "server/service/startup_models.h"

namespace gpucompute {

// Dense defaults (also the server's flag defaults): up to 256 requests or 8192 rows in one pass
// through a model, 4096 requests queued.
inline SchedulerOptions DefaultDenseScheduling() {
  SchedulerOptions o;
  o.max_batch_size = 256;
  o.max_batch_cost = 8192;
  o.max_queue_depth = 4096;
  return o;
}

// Assimilate defaults (also the flag defaults): up to 64 requests or 1e11 estimated flops in
// one launch, 1024 requests queued.
inline SchedulerOptions DefaultAssimilateScheduling() {
  SchedulerOptions o;
  o.max_batch_size = 64;
  o.max_batch_cost = int64_t{100000000000};
  o.max_queue_depth = 1024;
  return o;
}

struct ServerConfig {
  std::string address = "0.0.0.0:50051";  // port 0 picks a free port
  BackendOptions backend;
  SchedulerOptions scheduler;        // periodogram batching (cost: sample x frequency pairs)
  SchedulerOptions dense_scheduler = DefaultDenseScheduling();  // dense batching (cost: rows)
  SchedulerOptions assimilate_scheduler = DefaultAssimilateScheduling();  // cost: flops
  ServiceLimits limits;
  CallLog call_log = CallLog::kNone;  // --log_calls
  // Threads that finish calls (unpack a batch's results, build and send the replies); 0: two
  // per visible GPU plus two (CompletionThreads).
  int completion_threads = 0;
  // The process's connection limits (accept_guard.h), borrowed: their counts are exposed as
  // metrics. Null: none (a worker of the worker-mode front, whose listener is a Unix socket).
  PeerConnections* connections = nullptr;
  // Prometheus text format at http://HOST:metrics_port/metrics, HOST being the host of
  // `address`. -1: no endpoint (the metrics are still recorded); 0 picks a free port.
  int metrics_port = -1;
  // Label gpucompute_model_bytes by model name. Names are the clients' data and /metrics asks
  // for no token, so by default the family is one unlabelled total.
  bool metrics_model_names = false;
  // Extra gRPC channel arguments of the listening server (key, value); a value that parses as
  // an integer is passed as one (e.g. "grpc.http2.lookahead_bytes", "16777216").
  std::vector<std::pair<std::string, std::string>> grpc_args;
  // Memory gRPC itself may hold for calls (message buffers, transport): a ResourceQuota.
  // 0: half of the host's physical memory. Past it gRPC shrinks flow-control windows and
  // refuses new calls rather than allocating more.
  int64_t grpc_memory_quota_bytes = 0;
  int max_concurrent_streams = 1024;  // concurrent calls per connection (HTTP/2 streams)
  // A connection with no call for this long is closed (idle connections hold descriptors;
  // clients reconnect on their next call). Zero: never.
  absl::Duration max_connection_idle = absl::Minutes(5);
  // How often the service port is probed (ListenerProbe); a port that refuses connections
  // turns health NOT_SERVING. Zero: not probed.
  absl::Duration listener_probe_period = absl::Seconds(5);
  // A worker of the worker-mode front in handoff mode: the socket on which the front hands it
  // client connections, which this server then serves (handed_connections.h). -1: none.
  int handoff_fd = -1;
  // With handoff_fd: the front's internal socket and the secret that marks its own calls, for
  // relaying the fan-out calls of handed connections (service/front_relay.h). Empty: none.
  std::string front_address;
  std::string front_call_secret;
  TensorStoreOptions tensors;        // resident tensors: quotas, idle expiry
  // Dense models loaded before the server listens (--model_manifest); one that fails to load
  // fails Start.
  std::vector<StartupModel> models;
  bool allow_shared_memory = false;  // RegisterSharedMemory (clients on the same node)
  // Secret of the registration proofs (shared_memory_proof.h); empty: a random one.
  std::string shared_memory_proof_secret;
  // Shared-memory regions of all callers together (each holds a descriptor and a mapping).
  int max_shared_memory_regions = SharedMemoryRegistry::kDefaultMaxRegions;
  // Security (docs/security.md): TLS from PEM files; bearer tokens from a token file (empty:
  // none; format in auth.h) with a default per-token limit of calls in flight; a plaintext
  // port on the host of `address` serving only grpc.health.v1 (-1: none; 0 picks a free port).
  TlsFiles tls;
  std::string auth_token_file;
  int auth_default_max_in_flight = 64;
  // How often the token file's modification time, size and inode are checked; a change
  // reloads it (ReloadTokens). Zero: only ReloadTokens (SIGHUP) reloads it.
  absl::Duration auth_token_reload_interval = absl::Seconds(5);
  int health_port = -1;
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  ~Server();  // Shutdown() with a short grace period if still running

  int port() const { return port_; }
  // The metrics endpoint's port; 0 when there is none (metrics_port -1).
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  // Host memory held now by the work in progress (MemoryBudget).
  int64_t memory_in_use() const { return memory_ ? memory_->in_use() : 0; }
  // What /metrics serves (also without the endpoint). Valid until the server is destroyed.
  const metrics::Registry& metrics_registry() const { return *registry_; }
  // gpucompute's families, and through registry() a place for more. Valid until the server is
  // destroyed.
  metrics::ServerMetrics& metrics() { return *metrics_; }
  const std::string& backend_name() const { return backend_name_; }
  // The health-only port; 0 when there is none (health_port -1).
  int health_port() const { return health_port_; }

  // Sets the serving status of both health services (the service port's and the health
  // port's), overall and for "gpucompute.v1.Compute". Thread-safe; no effect once Shutdown
  // has begun (which sets NOT_SERVING). Serving is refused for good once a GPU is lost.
  void SetServing(bool serving);
  // True once a GPU was lost (a sticky CUDA error): nothing runs on any GPU of this process
  // again. A worker of the worker-mode front exits then, to be replaced.
  bool device_lost() const { return device_lost_.load(); }

  // Reads the token file again (main.cc on SIGHUP; the watcher thread when the file changes):
  // tokens it drops are revoked, new ones work at once; on any error (logged, and counted in
  // gpucompute_auth_token_reloads_total{result="error"}) the tokens stay as they were.
  // FAILED_PRECONDITION without a token file. Thread-safe.
  absl::Status ReloadTokens();

  // Stops accepting calls, lets in-flight calls finish (cancelling those still running after
  // `grace`), drains the scheduler and releases the devices. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(30));

 private:
  Server() = default;

  // Destruction order matters: service and gRPC server first, completions last; the metrics
  // registry after everything that records into it or that its callbacks read.
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  // The whole server's host memory (resident tensors and the work in progress), then the work
  // in progress's own budget inside it; both outlive what holds bytes of them.
  std::unique_ptr<MemoryBudget> server_memory_;
  std::unique_ptr<MemoryBudget> memory_;
  std::unique_ptr<IdleStreams> idle_uploads_;  // outlives the service's upload streams
  std::unique_ptr<CompletionQueue> completions_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<PeriodogramScheduler> scheduler_;
  std::unique_ptr<DenseScheduler> dense_scheduler_;
  std::unique_ptr<AssimilateScheduler> assimilate_scheduler_;
  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<CompletionQueue> loader_;
  std::unique_ptr<TensorStore> tensors_;
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  std::unique_ptr<TokenAuthenticator> auth_;  // null: no tokens
  std::unique_ptr<SecurityWatch> security_;   // token reloads, TLS file checks
  std::unique_ptr<FrontRelay> front_relay_;  // handoff mode: fan-out calls go to the front
  std::unique_ptr<ComputeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HandedConnections> handed_;    // handoff mode's connections; stopped first
  std::unique_ptr<grpc::Server> health_server_;  // the health port; stopped last
  std::unique_ptr<metrics::MetricsServer> metrics_server_;  // stopped first
  int port_ = 0;
  int health_port_ = 0;
  HealthStatus health_;  // of server_ and health_server_; closed when Shutdown begins
  std::string backend_name_;
  bool shut_down_ = false;
  std::atomic<bool> device_lost_{false};  // set by the backend's unhealthy-device listener
  std::atomic<bool> listener_lost_{false};  // set by listener_probe_
  std::unique_ptr<ListenerProbe> listener_probe_;  // stopped first at shutdown
};

}  // namespace gpucompute
