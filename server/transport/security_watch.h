// Keeps the security files current without a restart, for the single-process server and the
// worker-mode front alike: reloads the token file when asked (SIGHUP) or when its modification
// time, size or inode changes, and logs changes of the TLS files that gRPC's own watcher picks
// up (docs/security.md "TLS" and "Bearer tokens").
#pragma once

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/metrics/metrics.h"
#include "server/transport/auth.h"
#include "server/transport/credentials.h"

namespace gpucompute {

class SecurityWatch {
 public:
  // `auth` (null: no token file) and `registry` are borrowed and must outlive this. Registers
  // gpucompute_auth_token_reloads_total{result}. With `token_interval` > 0 a thread checks the
  // token file that often; with tls.reload_interval_s > 0 another checks the TLS files.
  SecurityWatch(TokenAuthenticator* auth, metrics::Registry* registry,
                absl::Duration token_interval, const TlsFiles& tls);
  ~SecurityWatch();  // Stop()
  SecurityWatch(const SecurityWatch&) = delete;
  SecurityWatch& operator=(const SecurityWatch&) = delete;

  // Reads the token file again: tokens it drops are revoked, new ones work at once; on any
  // error (logged and counted) the tokens stay as they were. FAILED_PRECONDITION without a
  // token file. Thread-safe.
  absl::Status ReloadTokens();

  // Stops the threads. Idempotent.
  void Stop();

 private:
  TokenAuthenticator* const auth_;
  metrics::Family<metrics::Counter>* reloads_;  // by result
  absl::Notification stop_;
  std::vector<std::thread> threads_;
};

}  // namespace gpucompute
