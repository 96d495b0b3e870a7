// The worker-mode front's assembly (see front_server.h).
#include "server/front/front_server.h"


#include <chrono>
#include <thread>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/front/worker_metrics.h"
#include "server/metrics/process_metrics.h"
#include "server/metrics/server_metrics.h"
#include "server/runtime/shared_memory_proof.h"
#include "server/transport/health_port.h"
#include "server/transport/listener.h"
#include "spdlog/spdlog.h"

namespace gpucompute::front {

absl::StatusOr<std::unique_ptr<FrontServer>> FrontServer::Start(FrontConfig config) {
  std::unique_ptr<FrontServer> s(new FrontServer());
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(config.tls));
  if (!config.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(s->auth_, TokenAuthenticator::FromFile(config.auth_token_file,
                                                            config.auth_default_max_in_flight));
  }
  s->registry_ = std::make_unique<metrics::Registry>();
  if (config.connections != nullptr) {
    metrics::RegisterConnectionMetrics(s->registry_.get(), [table = config.connections] { return table->stats(); });
  }
  s->process_registry_ = std::make_unique<metrics::Registry>();
  metrics::RegisterProcessMetrics(s->process_registry_.get());
  auto& calls = s->registry_->AddCounter(
      "gpucompute_front_calls_total",
      "calls the worker-mode front answered, by method and gRPC status code", {"method", "code"});

  if (config.workers.handoff) {
    // The workers relay their handed connections' fan-out calls here (service/front_relay.h).
    config.workers.front_address = absl::StrCat("unix:", config.workers.socket_dir, "/front.sock");
    config.workers.front_call_secret = SharedMemoryProofs::NewSecretHex();
  }
  // Health follows the workers: SERVING while any serves.
  FrontServer* front = s.get();
  ASSIGN_OR_RETURN(s->pool_, WorkerPool::Start(config.workers, [front](const WorkerPool& pool) {
                     front->health_.Set(pool.AnyServing() && !front->listener_lost_.load());
                   }));
  s->registry_->AddCallback(
      metrics::MetricType::kGauge, "gpucompute_worker_up",
      "1 while the worker process (one per GPU) serves; 0 while it starts, after a fault, or "
      "while it is restarted", {"worker", "gpu"}, [front] {
        std::vector<metrics::Sample> out;
        for (const WorkerSnapshot& w : front->pool_->Snapshot()) {
          out.push_back({{absl::StrCat(w.index), w.device}, w.state == WorkerState::kServing ? 1.0 : 0.0});
        }
        return out;
      });
  s->registry_->AddCallback(
      metrics::MetricType::kCounter, "gpucompute_worker_restarts_total",
      "times the worker process was started again after it exited", {"worker"}, [front] {
        std::vector<metrics::Sample> out;
        for (const WorkerSnapshot& w : front->pool_->Snapshot()) {
          out.push_back({{absl::StrCat(w.index)}, static_cast<double>(w.restarts)});
        }
        return out;
      });
  s->registry_->AddCallback(
      metrics::MetricType::kCounter, "gpucompute_worker_connections_handed_total",
      "client connections the front handed to the worker (--worker_connections=handoff)", {"worker"}, [front] {
        std::vector<metrics::Sample> out;
        for (const WorkerSnapshot& w : front->pool_->Snapshot()) {
          out.push_back({{absl::StrCat(w.index)}, static_cast<double>(w.connections_handed)});
        }
        return out;
      });
  s->registry_->AddCallback(
      metrics::MetricType::kGauge, "gpucompute_worker_calls_in_flight",
      "calls the front has routed to the worker that have not ended", {"worker"}, [front] {
        std::vector<metrics::Sample> out;
        for (const WorkerSnapshot& w : front->pool_->Snapshot()) {
          out.push_back({{absl::StrCat(w.index)}, static_cast<double>(w.in_flight)});
        }
        return out;
      });

  ProxyParts parts;
  parts.pool = s->pool_.get();
  parts.auth = s->auth_.get();
  parts.device_index_of_worker = config.device_index_of_worker;
  parts.calls = &calls;
  parts.front_call_secret = config.workers.front_call_secret;
  s->proxy_ = std::make_unique<ProxyService>(std::move(parts));

  grpc::EnableDefaultHealthCheckService(true);
  if (config.workers.handoff) {
    RETURN_IF_ERROR(s->StartDealing(config));
  } else {
    RETURN_IF_ERROR(s->StartProxying(config, credentials));
  }
  s->health_.Set(s->pool_->AnyServing());
  s->listener_probe_ = ListenerProbe::Watch(config.address, s->port_, config.listener_probe_period,
                                            "the front's port", [front] {
                                              front->listener_lost_.store(true);
                                              front->health_.Set(false);
                                            });
  s->security_ = std::make_unique<SecurityWatch>(s->auth_.get(), s->registry_.get(),
                                                 config.auth_token_reload_interval, config.tls);
  if (config.metrics_port >= 0) {
    ASSIGN_OR_RETURN(s->metrics_server_,
                     metrics::MetricsServer::Start(HostOfAddress(config.address), config.metrics_port,
                                                   [front] { return front->Expose(); }));
  }
  spdlog::info("gpucompute front listening on {} (port {}, {}, {} tokens), {} workers",
               config.address, s->port_, TlsModeName(config.tls), s->auth_ ? s->auth_->size() : 0,
               s->pool_->size());
  if (s->health_server_) spdlog::info("health checks (plaintext) on port {}", s->health_port_);
  return s;
}

absl::Status FrontServer::StartProxying(const FrontConfig& config,
                                         std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  ListenerOptions listener;
  listener.address = config.address;
  listener.credentials = credentials;
  listener.max_receive_bytes = config.max_request_bytes;
  listener.max_send_bytes = -1;  // the workers bound their replies
  listener.max_concurrent_streams = config.max_concurrent_streams;
  listener.memory_quota_bytes = config.grpc_memory_quota_bytes;
  listener.quota_name = "gpucompute-front";
  listener.grpc_args = config.grpc_args;
  listener.max_connection_idle = config.max_connection_idle;
  builder.RegisterCallbackGenericService(proxy_.get());
  ASSIGN_OR_RETURN(Listening listening, StartListening(builder, listener, config.health_port, health_));
  server_ = std::move(listening.server);
  port_ = listening.port;
  health_server_ = std::move(listening.health_server);
  health_port_ = listening.health_port;
  return absl::OkStatus();
}

// Handoff mode: first the internal socket on which the workers relay the fan-out calls of
// their connections (LoadModel, UnloadModel, (Un)RegisterSharedMemory), served by the proxy as
// in proxy mode; then the client port, whose connections go to the workers.
absl::Status FrontServer::StartDealing(const FrontConfig& config) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.workers.front_address, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(-1);  // the workers bounded what they relay
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterCallbackGenericService(proxy_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::InternalError(absl::StrCat("cannot listen on ", config.workers.front_address));
  }
  ASSIGN_OR_RETURN(dealer_, ConnectionDealer::Start(config.address, pool_.get()));
  port_ = dealer_->port();
  if (config.health_port >= 0) {
    ASSIGN_OR_RETURN(health_server_, StartHealthServer(HostOfAddress(config.address), config.health_port,
                                                       &health_port_));
  }
  health_.Attach(nullptr, health_server_.get());
  return absl::OkStatus();
}

FrontServer::~FrontServer() { Shutdown(absl::Seconds(5)); }

std::string FrontServer::Expose() const {
  std::vector<std::pair<std::string, std::string>> workers = {{"front", process_registry_->Expose()}};
  for (const WorkerSnapshot& w : pool_->Snapshot()) {
    if (w.state != WorkerState::kServing) continue;
    workers.emplace_back(absl::StrCat(w.index), ScrapeWorker(w.metrics_port));
  }
  return registry_->Expose() + MergeWorkerExpositions(workers);
}

absl::Status FrontServer::ReloadTokens() {
  return security_ ? security_->ReloadTokens()
                   : absl::FailedPreconditionError("no token file (--auth_token_file)");
}

void FrontServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  listener_probe_.reset();  // the port closes below: that is no loss
  if (security_) security_->Stop();
  health_.Close();
  if (dealer_) dealer_->Stop();  // the port closes; handed connections drain with their workers
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace);
  std::thread drain;
  if (server_) drain = std::thread([this, deadline] { server_->Shutdown(deadline); });
  // The calls accepted before the listener closed pick their worker first; then the workers
  // drain (their SIGTERM handling ends open Submit streams after their running jobs).
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time routed_by = absl::Now() + absl::Seconds(2);
  while (proxy_ && proxy_->unrouted() > 0 && absl::Now() < routed_by) absl::SleepFor(absl::Milliseconds(5));
  if (pool_) pool_->BeginStop();
  if (drain.joinable()) drain.join();
  if (pool_) pool_->Stop();
  if (health_server_) health_server_->Shutdown(std::chrono::system_clock::now());
  if (metrics_server_) metrics_server_->Stop();
  server_.reset();
  dealer_.reset();
  health_server_.reset();
  proxy_.reset();
  metrics_server_.reset();
  pool_.reset();
  if (port_ != 0) spdlog::info("gpucompute front stopped");
}

}  // namespace gpucompute::front
