// Token-file reloads and TLS-file checks (see security_watch.h).
#include "server/transport/security_watch.h"

#include <string>

#include "common/file_stamp.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

SecurityWatch::SecurityWatch(TokenAuthenticator* auth, metrics::Registry* registry,
                             absl::Duration token_interval, const TlsFiles& tls)
    : auth_(auth),
      reloads_(&registry->AddCounter(
          "gpucompute_auth_token_reloads_total",
          "reloads of the token file (SIGHUP or a change seen), by result (ok, error)", {"result"})) {
  if (auth_) {
    reloads_->WithLabels({"ok"});
    reloads_->WithLabels({"error"});
  }
  if (auth_ && token_interval > absl::ZeroDuration()) {
    threads_.emplace_back([this, token_interval] {
      while (!stop_.WaitForNotificationWithTimeout(token_interval)) {
        if (auth_->FileChanged()) (void)ReloadTokens();
      }
    });
  }
  if (tls.enabled() && tls.reload_interval_s > 0) {
    spdlog::info("TLS files are re-read every {} s", tls.reload_interval_s);
    threads_.emplace_back([this, files = tls] {
      std::vector<FileStamp> seen = StampTlsFiles(files);
      while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(files.reload_interval_s))) {
        std::vector<FileStamp> now = StampTlsFiles(files);
        if (now == seen) continue;
        seen = std::move(now);
        if (absl::Status checked = CheckTlsFiles(files); !checked.ok()) {
          spdlog::error("TLS files changed, but {}: new handshakes fail until it is fixed "
                        "(a file that cannot be read leaves the previous one in use)",
                        std::string(checked.message()));
        } else {
          spdlog::info("TLS files changed: new handshakes use them within {} s",
                       files.reload_interval_s);
        }
      }
    });
  }
}

SecurityWatch::~SecurityWatch() { Stop(); }

void SecurityWatch::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

absl::Status SecurityWatch::ReloadTokens() {
  if (!auth_) return absl::FailedPreconditionError("no token file (--auth_token_file)");
  auto result = auth_->Reload();
  if (!result.ok()) {
    reloads_->WithLabels({"error"}).Increment();
    spdlog::error("token file not reloaded, the {} tokens in use stay: {}", auth_->size(),
                  std::string(result.status().message()));
    return result.status();
  }
  reloads_->WithLabels({"ok"}).Increment();
  spdlog::info("token file {} reloaded: {} tokens ({} added, {} removed, {} kept)", auth_->path(),
               auth_->size(), result->added, result->removed, result->kept);
  return absl::OkStatus();
}

}  // namespace gpucompute
