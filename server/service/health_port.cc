// The health-only port (see health_port.h).
#include "server/service/health_port.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpucompute {

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
