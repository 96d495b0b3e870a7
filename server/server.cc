// Server assembly (see server.h).
#include "server/server.h"


#include <chrono>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/metrics/process_metrics.h"
#include "server/runtime/runtime_metrics.h"
#include "server/transport/health_port.h"
#include "server/transport/listener.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

namespace {

// config.completion_threads, or by default two per visible GPU plus two: every GPU's batches
// finish on these threads, and on the 2 x H100 machine two threads finishing both GPUs' 2 MB
// periodogram replies ran at ~90% each while the GPUs waited.
int CompletionThreads(const ServerConfig& config) {
  if (config.completion_threads > 0) return config.completion_threads;
  const int gpus = config.backend.kind == "cpu" ? 0 : VisibleCudaDeviceCount();
  return 2 + 2 * gpus;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  std::unique_ptr<Server> s(new Server());
  // Security first: a bad certificate or token file fails before any device is touched.
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(config.tls));
  if (!config.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(s->auth_, TokenAuthenticator::FromFile(config.auth_token_file,
                                                            config.auth_default_max_in_flight));
  }
  s->registry_ = std::make_unique<metrics::Registry>();
  s->metrics_ = std::make_unique<metrics::ServerMetrics>(s->registry_.get());
  s->completions_ = std::make_unique<CompletionQueue>(CompletionThreads(config));
  BackendOptions backend_options = config.backend;
  backend_options.pinned_tensor_bytes =
      PinnedTensorBytes(config.backend.pinned_tensor_bytes, config.limits.server_memory_bytes);
  backend_options.max_frequencies_per_series = config.limits.max_frequencies_per_series;
  // A lost GPU cannot come back in this process: health turns NOT_SERVING so that the
  // orchestrator restarts the server, while the other GPUs keep serving until it does.
  backend_options.on_device_unhealthy = [server = s.get()](int device, const absl::Status& cause) {
    spdlog::critical("GPU {} lost ({}): health is now NOT_SERVING", device, std::string(cause.message()));
    server->device_lost_.store(true);
    server->SetServing(false);
  };
  backend_options.periodogram_stages = s->metrics_->ForBatchStages(PeriodogramTraits::kName);
  backend_options.dense_stages = s->metrics_->ForBatchStages(DenseTraits::kName);
  backend_options.assimilate_stages = s->metrics_->ForBatchStages(AssimilateTraits::kName);
  ASSIGN_OR_RETURN(s->backend_, CreateBackend(backend_options, s->completions_.get()));
  s->backend_name_ = s->backend_->name();
  s->scheduler_ = std::make_unique<PeriodogramScheduler>(
      s->backend_.get(), config.scheduler, s->metrics_->ForScheduler(PeriodogramTraits::kName));
  s->dense_scheduler_ = std::make_unique<DenseScheduler>(
      s->backend_.get(), config.dense_scheduler, s->metrics_->ForScheduler(DenseTraits::kName));
  s->assimilate_scheduler_ = std::make_unique<AssimilateScheduler>(
      s->backend_.get(), config.assimilate_scheduler,
      s->metrics_->ForScheduler(AssimilateTraits::kName));
  s->models_ = std::make_unique<ModelRegistry>(config.limits.dense.max_models);
  metrics::RegisterProcessMetrics(s->registry_.get());
  RegisterRuntimeMetrics(s->registry_.get(), s->backend_.get(), s->models_.get(),
                         config.metrics_model_names);
  // Every op's success and duration series exist (as 0) from the start, so that rate() and
  // increase() see their first calls.
  for (const char* op : {"periodogram", "dense", "assimilate", "echo", "load_model", "unload_model"}) {
    s->metrics_->Calls(op);
  }
  s->server_memory_ = std::make_unique<MemoryBudget>(
      ServerMemoryBytes(config.limits.server_memory_bytes), "--server_memory_bytes");
  s->memory_ = std::make_unique<MemoryBudget>(config.limits.memory_budget_bytes, "--memory_budget_bytes",
                                              config.limits.memory_budget_share, "--memory_budget_share",
                                              s->server_memory_.get());
  TensorStoreOptions tensor_options = config.tensors;
  tensor_options.server_memory = s->server_memory_.get();
  tensor_options.host_memory = s->backend_->TensorMemory();
  if (tensor_options.host_memory != nullptr) {
    spdlog::info("resident tensors of 1 MiB or more: page-locked, up to {} MiB (--pinned_tensor_bytes)",
                 tensor_options.host_memory->capacity() >> 20);
  }
  s->tensors_ = std::make_unique<TensorStore>(tensor_options);
  s->metrics_->AddResidentTensors([tensors = s->tensors_.get()] {
    const TensorStoreStats stats = tensors->Stats();
    return metrics::ResidentTensorCounts{stats.tensors, stats.bytes};
  });
  if (config.connections != nullptr) {
    metrics::RegisterConnectionMetrics(s->registry_.get(), [table = config.connections] { return table->stats(); });
  }
  s->loader_ = std::make_unique<CompletionQueue>(1);
  s->shared_memory_ = std::make_unique<SharedMemoryRegistry>(config.allow_shared_memory,
                                                             config.shared_memory_proof_secret,
                                                             config.max_shared_memory_regions);
  ServiceParts parts;
  parts.memory = s->memory_.get();
  s->idle_uploads_ = std::make_unique<IdleStreams>(config.limits.upload_idle_timeout);
  parts.idle_uploads = s->idle_uploads_.get();
  parts.backend = s->backend_.get();
  parts.periodogram = s->scheduler_.get();
  parts.dense = s->dense_scheduler_.get();
  parts.assimilate = s->assimilate_scheduler_.get();
  parts.models = s->models_.get();
  parts.loader = s->loader_.get();
  parts.metrics = s->metrics_.get();
  parts.tensors = s->tensors_.get();
  parts.shared_memory = s->shared_memory_.get();
  parts.limits = config.limits;
  parts.call_log = config.call_log;
  parts.auth = s->auth_.get();
  if (config.handoff_fd >= 0 && !config.front_address.empty()) {
    s->front_relay_ = std::make_unique<FrontRelay>(config.front_address, config.front_call_secret);
    parts.front = s->front_relay_.get();
  }
  s->service_ = std::make_unique<ComputeService>(std::move(parts));
  for (const StartupModel& model : config.models) {
    RETURN_IF_ERROR(LoadStartupModel(model, config.limits.dense, *s->backend_, *s->models_));
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ListenerOptions listener;
  listener.address = config.address;
  listener.credentials = credentials;
  listener.max_receive_bytes = config.limits.max_request_bytes;
  listener.max_send_bytes = config.limits.max_response_bytes;
  listener.max_concurrent_streams = config.max_concurrent_streams;
  listener.memory_quota_bytes = config.grpc_memory_quota_bytes;
  listener.quota_name = "gpucompute-server";
  listener.max_connection_idle = config.max_connection_idle;
  listener.grpc_args = config.grpc_args;
  builder.RegisterService(s->service_.get());
  ASSIGN_OR_RETURN(Listening listening, StartListening(builder, listener, config.health_port, s->health_));
  s->server_ = std::move(listening.server);
  s->port_ = listening.port;
  s->health_server_ = std::move(listening.health_server);
  s->health_port_ = listening.health_port;
  if (config.handoff_fd >= 0) {
    ASSIGN_OR_RETURN(s->handed_, HandedConnections::Start(config.handoff_fd, s->server_.get(),
                                                          config.connections));
  }
  s->SetServing(true);
  s->listener_probe_ = ListenerProbe::Watch(config.address, s->port_, config.listener_probe_period,
                                            "the service port", [server = s.get()] {
                                              server->listener_lost_.store(true);
                                              server->SetServing(false);
                                            });
  if (config.metrics_port >= 0) {
    ASSIGN_OR_RETURN(s->metrics_server_, metrics::MetricsServer::Start(HostOfAddress(config.address),
                                                                      config.metrics_port,
                                                                      s->registry_.get()));
  }
  spdlog::info("gpucompute listening on {} (port {}, {}, {} tokens), backend {}", config.address,
               s->port_, TlsModeName(config.tls), s->auth_ ? s->auth_->size() : 0, s->backend_name_);
  if (s->auth_ && !config.tls.enabled()) {
    spdlog::warn("bearer tokens over plaintext: use TLS unless a proxy encrypts the traffic");
  }
  if (s->health_server_) spdlog::info("health checks (plaintext) on port {}", s->health_port_);
  s->security_ = std::make_unique<SecurityWatch>(s->auth_.get(), s->registry_.get(),
                                                 config.auth_token_reload_interval, config.tls);
  return s;
}

Server::~Server() { Shutdown(absl::Seconds(5)); }

void Server::SetServing(bool serving) {
  // A lost GPU or listener never comes back in this process.
  health_.Set(serving && !device_lost_.load() && !listener_lost_.load());
}

absl::Status Server::ReloadTokens() {
  return security_ ? security_->ReloadTokens()
                   : absl::FailedPreconditionError("no token file (--auth_token_file)");
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  listener_probe_.reset();  // the port closes below: that is no loss
  if (handed_) handed_->Stop();  // no more connections from the front
  if (security_) security_->Stop();
  // Start() may have failed half-way: every member can be null here.
  health_.Close();  // probes see NOT_SERVING while calls drain
  if (service_) {
    // Open Submit streams would otherwise keep the drain below waiting until `grace` for
    // clients that may never half-close: they stop reading now and finish UNAVAILABLE once
    // their running jobs are answered.
    if (const size_t streams = service_->BeginShutdown(); streams > 0) {
      spdlog::info("shutting down: {} open Submit stream(s) finish after their running jobs", streams);
    }
  }
  if (server_) {
    // Stops accepting; waits for in-flight calls (whose results arrive through the scheduler,
    // which keeps running) until `grace`, then cancels the rest.
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  }
  if (scheduler_) scheduler_->Shutdown();
  if (dense_scheduler_) dense_scheduler_->Shutdown();
  if (assimilate_scheduler_) assimilate_scheduler_->Shutdown();
  loader_.reset();  // runs what is posted (loads of calls gRPC still waits for), then joins
  server_.reset();
  if (health_server_) health_server_->Shutdown(std::chrono::system_clock::now());
  health_server_.reset();
  service_.reset();
  scheduler_.reset();
  dense_scheduler_.reset();
  assimilate_scheduler_.reset();
  // Scrapes go on while calls drain; none may run once what the metrics callbacks read
  // (models, backend) starts to go.
  if (metrics_server_) metrics_server_->Stop();
  if (models_) models_->Clear();  // device memory goes before the backend does
  models_.reset();
  tensors_.reset();        // jobs are done: nothing holds a resident tensor any more
  shared_memory_.reset();  // unmaps every region
  backend_.reset();
  completions_.reset();
  metrics_server_.reset();
  if (port_ != 0) spdlog::info("gpucompute stopped");
}

}  // namespace gpucompute
