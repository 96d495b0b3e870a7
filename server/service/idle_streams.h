// Streams that upload (LoadModel) must not stay open without sending: an open upload holds a
// model name, a share of --max_models and a reservation of memory. Each such stream joins the
// watch when it starts, is touched on every message, and leaves before it finishes. A thread
// cancels (TryCancel) a stream that has sent nothing for the idle timeout, and remembers that
// it did, so that the stream can say why it ended. Thread-safe.
#pragma once

#include <cstdint>
#include <thread>

#include <grpcpp/server_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpucompute {

class IdleStreams {
 public:
  using Id = uint64_t;

  // Cancels streams idle for longer than `idle` (checked every idle / 4, at most every second).
  explicit IdleStreams(absl::Duration idle);
  ~IdleStreams();  // stops the thread; streams still registered are left alone
  IdleStreams(const IdleStreams&) = delete;
  IdleStreams& operator=(const IdleStreams&) = delete;

  // Watches the stream of `context` (which must stay valid until Leave) from now.
  Id Join(grpc::CallbackServerContext* context);
  // The stream sent something: its idle time starts again.
  void Touch(Id id);
  // Stops watching `id`; true when it was cancelled for being idle.
  bool Leave(Id id);

  absl::Duration idle() const { return idle_; }

 private:
  struct Entry {
    grpc::CallbackServerContext* context;
    absl::Time last;
    bool cancelled = false;
  };
  void Run();

  const absl::Duration idle_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Id next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<Id, Entry> streams_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpucompute
