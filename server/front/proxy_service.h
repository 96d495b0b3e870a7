// The front's gRPC service in worker mode (docs/server.md "Worker mode"): every call of any method
// arrives here as bytes (gRPC's generic callback API), is authenticated against the front's
// tokens, and goes to one worker or to all of them (request_route.h):
// - operations go to the least-loaded serving worker; to the one holding the resident tensors
//   they name; Dense to one holding the model; calls that create or keep tensors to the
//   caller's home worker (where its tensors live), so that later calls find them together;
// - models and shared-memory regions go to every serving worker (a model is replicated, one
//   copy per GPU), lists and ServerInfo are merged.
// Requests and replies stream through without being decoded, beyond the first request
// message's routing fields.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/front/worker_pool.h"
#include "server/metrics/metrics.h"
#include "server/transport/auth.h"

namespace gpucompute::front {

struct ProxyParts {
  WorkerPool* pool = nullptr;                 // borrowed
  const TokenAuthenticator* auth = nullptr;   // null: no tokens
  std::vector<int> device_index_of_worker;    // the front's GPU index of each worker; -1: none
  metrics::Family<metrics::Counter>* calls = nullptr;  // by method and code; may be null
  // Handoff mode: the value of kFrontCallKey on every call to a worker (which then runs it
  // itself instead of relaying it back here). Empty: not sent.
  std::string front_call_secret;
};

// Each client's home worker: where the resident tensors it creates live. Thread-safe.
class ClientHomes {
 public:
  // The client's home while that worker incarnation serves; otherwise, with `assign`, the
  // least-loaded serving worker becomes its home. -1 when there is none.
  int HomeOf(const std::string& client, WorkerPool& pool, bool assign);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::pair<int, int>> homes_ ABSL_GUARDED_BY(mu_);  // worker, incarnation
};

class ProxyService final : public grpc::CallbackGenericService {
 public:
  explicit ProxyService(ProxyParts parts) : shared_(std::move(parts), &unrouted_) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override;

  // Calls accepted whose worker is not chosen yet: the front's drain waits for none before
  // it stops the workers, so that no accepted call finds its worker gone.
  int64_t unrouted() const { return unrouted_.load(); }

  // What the calls share.
  struct Shared {
    Shared(ProxyParts p, std::atomic<int64_t>* u) : parts(std::move(p)), unrouted(u) {}
    const ProxyParts parts;
    ClientHomes homes;
    std::atomic<int64_t>* const unrouted;
  };

 private:
  std::atomic<int64_t> unrouted_{0};
  Shared shared_;
};

}  // namespace gpucompute::front
