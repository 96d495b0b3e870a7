// The /metrics endpoint (see metrics_server.h).
#include "server/metrics/metrics_server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>

#include <httplib.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"
#include "spdlog/spdlog.h"

namespace gpucompute::metrics {
namespace {

// Scrapes are rare and small: two threads serve them (httplib's default is one per core).
constexpr size_t kHttpThreads = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port,
                                                                    const Registry* registry) {
  return Start(host, port, [registry] { return registry->Expose(); });
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port, std::function<std::string()> expose) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *s->http_;
  http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  // httplib sets SO_REUSEPORT by default, which lets a second server bind the same port and
  // steal half the scrapes; SO_REUSEADDR alone still allows a quick restart.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.Get("/metrics", [expose = std::move(expose)](const httplib::Request&, httplib::Response& res) {
    res.set_content(expose(), kExpositionContentType);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("gpucompute: Prometheus metrics at /metrics\n", "text/plain");
  });

  if (port == 0) {
    s->port_ = http.bind_to_any_port(host);
    if (s->port_ <= 0) s->port_ = 0;
  } else if (http.bind_to_port(host, port)) {
    s->port_ = port;
  }
  if (s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("metrics: could not listen on ", host, ":", port));
  }

  auto finished = std::make_shared<std::atomic<bool>>(false);
  s->listener_ = std::thread([http = s->http_.get(), finished] {
    http->listen_after_bind();
    finished->store(true);
  });
  // httplib's stop() does nothing until the accept loop runs: wait for it (it starts at once
  // or fails at once), so that a Stop() right after Start() cannot miss the listener.
  while (!http.is_running() && !finished->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!http.is_running()) {
    s->listener_.join();
    return absl::UnavailableError(absl::StrCat("metrics: the listener on ", host, ":", s->port_,
                                               " did not start"));
  }
  spdlog::info("metrics at http://{}:{}/metrics", host, s->port_);
  return s;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (http_) http_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace gpucompute::metrics
