// The front's worker processes (docs/server.md "Worker mode"): one gpucompute-server per GPU, each
// seeing only its GPU (CUDA_VISIBLE_DEVICES) and listening on a Unix socket in a private
// directory. A sticky CUDA error ends CUDA for its whole process, so it ends only that
// worker: the pool stops routing to a worker the moment its health turns NOT_SERVING, and
// starts a fresh one when the process has exited. What the pool also tracks per worker: the
// calls it runs (for least-loaded routing) and the models it holds (a restarted worker holds
// none).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace gpucompute::front {

// The descriptor on which a worker receives handed connections (handoff mode).
inline constexpr int kHandoffDescriptor = 3;
// The environment variable that tells a worker its front's pid.
inline constexpr char kFrontPidVariable[] = "GPUCOMPUTE_FRONT_PID";
// The one that gives every worker the front's shared-memory proof secret (hex): a proof one
// worker issues checks on all of them, since registration reaches every worker.
inline constexpr char kProofSecretVariable[] = "GPUCOMPUTE_SHARED_MEMORY_PROOF_SECRET";

struct WorkerPoolOptions {
  std::string executable;               // the server binary (the front's own)
  std::vector<std::string> base_args;   // the front's arguments; the pool appends its own
  int workers = 1;
  // The CUDA_VISIBLE_DEVICES value of each worker's GPU (one entry per worker), or empty for
  // workers without a GPU (the CPU backend; tests).
  std::vector<std::string> devices;
  std::string socket_dir;               // created 0700 if missing; sockets and port files
  absl::Duration start_timeout = absl::Minutes(5);  // spawn to SERVING, else killed
  absl::Duration stop_grace = absl::Seconds(30);    // SIGTERM to SIGKILL on Stop
  int channels_per_worker = 4;          // HTTP/2 connections to each worker
  // --worker_connections=handoff: each worker gets a socket (its descriptor 3) over which the
  // front hands it client connections (HandConnection), which it serves under the front's
  // transport settings; with false (proxy) a worker answers only the front's calls.
  bool handoff = false;
  // Handoff mode: the front's internal socket ("unix:/path") and the secret that marks the
  // front's calls (kFrontCallKey), given to each worker (--front_address and
  // kFrontCallSecretVariable) for relaying its handed connections' fan-out calls.
  std::string front_address;
  std::string front_call_secret;
  // Models every worker loads before it serves (--model_manifest, in base_args): each worker,
  // restarted ones too, holds them from its first call.
  std::vector<std::string> startup_models;
  // The shared-memory proof secret every worker gets (hex; empty: a random one per pool).
  std::string proof_secret_hex;
  // TESTS ONLY: the worker of this index runs with --inject_sticky_fault_device=0 and
  // --inject_sticky_fault_after_batches=N in its first incarnation (not after a restart).
  int inject_fault_worker = -1;
  int64_t inject_fault_after_batches = 1;
};

enum class WorkerState {
  kStarting,  // spawned, not yet SERVING
  kServing,   // routable
  kFaulted,   // said NOT_SERVING (a device fault): not routed to, waiting for it to exit
  kDown,      // exited; restarted after a back-off
};
const char* WorkerStateName(WorkerState state);

struct WorkerSnapshot {
  int index = 0;
  pid_t pid = 0;
  WorkerState state = WorkerState::kStarting;
  int restarts = 0;
  int64_t in_flight = 0;
  std::string device;   // CUDA_VISIBLE_DEVICES value; empty without a GPU
  std::string message;  // why it is not serving
  int metrics_port = 0; // 0: unknown yet
  int64_t connections_handed = 0;  // client connections handed to it (handoff mode)
};

class WorkerPool {
 public:
  // Spawns every worker and waits until each serves (or options.start_timeout passes):
  // UNAVAILABLE when none does. `on_change` runs (on the pool's threads) with the pool after
  // any worker's state changed; it must not hold a lock that the pool's callers hold.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(
      WorkerPoolOptions options, std::function<void(const WorkerPool&)> on_change);
  ~WorkerPool();  // Stop()

  int size() const { return static_cast<int>(workers_.size()); }

  // A worker that may run a call now: the serving one with the fewest calls in flight (ties go
  // round-robin), among those holding `model` when it is given; -1 when there is none.
  int PickLeastLoaded(const std::string* model = nullptr);
  bool Serving(int worker) const;
  std::vector<int> ServingWorkers() const;
  bool AnyServing() const;
  // The incarnation (restart count) a worker is in: calls remember it, so that what they
  // record about a worker (models, clients' tensors) is dropped when it restarts.
  int Incarnation(int worker) const;

  // A stub for a call to `worker` (one of its channels, round-robin); null when the worker
  // is not serving.
  std::shared_ptr<grpc::GenericStub> Stub(int worker);
  void CallStarted(int worker);
  void CallEnded(int worker);

  // Handoff mode: sends the accepted client connection `fd` to the next serving worker (round
  // robin; one whose socket is full or closed is skipped). False when no worker took it. The
  // caller still owns and closes `fd`.
  bool HandConnection(int fd);

  // Models each worker holds (LoadModel/UnloadModel through the front).
  void AddModel(int worker, int incarnation, const std::string& name);
  void RemoveModel(int worker, const std::string& name);
  bool AnyHasModel(const std::string& name) const;

  std::vector<WorkerSnapshot> Snapshot() const;
  // The front's notion of why a worker is not serving, for error messages.
  std::string Describe(int worker) const;

  // SIGTERM to every worker (they drain their calls), SIGKILL to those still running after
  // options.stop_grace; no restarts from then on. Idempotent.
  void Stop();
  // SIGTERM to every worker without waiting (the front's drain: the workers end their open
  // Submit streams and finish in-flight calls while the front's server drains). No restarts
  // from then on.
  void BeginStop();

 private:
  struct Worker;
  class HealthWatch;

  explicit WorkerPool(WorkerPoolOptions options, std::function<void(const WorkerPool&)> on_change);
  absl::Status Spawn(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Handoff mode: a new socket pair for `w`'s next incarnation; returns the worker's end.
  absl::StatusOr<int> OpenHandoff(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Monitor();
  void OnHealth(int worker, int incarnation, int status);
  void OnWatchEnded(int worker, int incarnation);
  void Changed();

  const WorkerPoolOptions options_;
  const std::function<void(const WorkerPool&)> on_change_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int watches_ ABSL_GUARDED_BY(mu_) = 0;  // HealthWatch calls not yet done
  std::atomic<uint32_t> round_robin_{0};
  int next_handoff_ ABSL_GUARDED_BY(mu_) = 0;  // HandConnection's round robin
  absl::Notification stop_monitor_;
  std::thread monitor_;
};

}  // namespace gpucompute::front
