// The health-only port (see health_port.h).
#include "server/transport/health_port.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/health_wire.h"

namespace gpucompute {

std::string HostOfAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return "127.0.0.1";
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close != std::string::npos) return address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return "0.0.0.0";
  return address.substr(0, colon);
}

namespace {

void SetHealth(grpc::Server* server, bool serving) {
  if (server == nullptr) return;
  if (auto* health = server->GetHealthCheckService()) {
    health->SetServingStatus(serving);
    health->SetServingStatus(kComputeHealthService, serving);
  }
}

}  // namespace

void HealthStatus::Attach(grpc::Server* server, grpc::Server* health_server) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  server_ = server;
  health_server_ = health_server;
  SetHealth(server_, serving_);
  SetHealth(health_server_, serving_);
}

void HealthStatus::Set(bool serving) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  serving_ = serving;
  SetHealth(server_, serving);
  SetHealth(health_server_, serving);
}

void HealthStatus::Close() {
  absl::MutexLock lock(&mu_);
  SetHealth(server_, false);
  SetHealth(health_server_, false);
  server_ = health_server_ = nullptr;
  closed_ = true;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& host, int port,
                                                                int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  const std::string address =
      absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), bound_port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0 || server->GetHealthCheckService() == nullptr) {
    return absl::UnavailableError(absl::StrCat("health port: could not listen on ", address));
  }
  server->GetHealthCheckService()->SetServingStatus(false);
  return server;
}

}  // namespace gpucompute
