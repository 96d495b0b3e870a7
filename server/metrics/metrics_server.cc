// The /metrics endpoint (see metrics_server.h).
#include "server/metrics/metrics_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"
#include "spdlog/spdlog.h"

namespace gpucompute::metrics {
namespace {

constexpr unsigned kMaxConnections = 64;
constexpr unsigned kMaxConnectionsPerAddress = 8;
constexpr unsigned kIdleTimeoutS = 10;

MHD_Result Reply(MHD_Connection* connection, unsigned status, const std::string& body,
                 const char* content_type) {
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

// Every request: GET /metrics, GET /, else 404 (405 for other methods).
MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** /*state*/) {
  if (*upload_data_size != 0) {
    *upload_data_size = 0;  // a body is read and dropped
    return MHD_YES;
  }
  if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 && std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n", "text/plain");
  }
  const auto& expose = *static_cast<const std::function<std::string()>*>(cls);
  if (std::strcmp(url, "/metrics") == 0) return Reply(connection, MHD_HTTP_OK, expose(), kExpositionContentType);
  if (std::strcmp(url, "/") == 0) {
    return Reply(connection, MHD_HTTP_OK, "gpucompute: Prometheus metrics at /metrics\n", "text/plain");
  }
  return Reply(connection, MHD_HTTP_NOT_FOUND, "not found\n", "text/plain");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port,
                                                                    const Registry* registry) {
  return Start(host, port, [registry] { return registry->Expose(); });
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port, std::function<std::string()> expose) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->expose_ = std::move(expose);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  const std::string bind_host = host == "[::]" ? "::" : host;
  if (getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(), service.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot resolve ", host));
  }
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         (found->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  s->daemon_ = MHD_start_daemon(
      flags, static_cast<uint16_t>(port), nullptr, nullptr, &Answer, &s->expose_,
      MHD_OPTION_SOCK_ADDR, found->ai_addr, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxConnectionsPerAddress, MHD_OPTION_CONNECTION_TIMEOUT,
      kIdleTimeoutS, MHD_OPTION_END);
  freeaddrinfo(found);
  if (s->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("metrics: could not listen on ", host, ":", port));
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  s->port_ = bound != nullptr ? bound->port : port;
  spdlog::info("metrics at http://{}:{}/metrics", host, s->port_);
  return s;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace gpucompute::metrics
