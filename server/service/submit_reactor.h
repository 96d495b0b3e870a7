// The Submit stream: jobs of any operation in, results out as each finishes. At most
// `limits.stream.max_jobs_in_flight` jobs of a stream run at once: the next job is read only
// when one finishes, so a fast client is held back by HTTP/2 flow control instead of filling
// a queue. A job that fails is answered with its own status and the stream goes on. A
// message that does not parse as a SubmitRequest ends the reading: the jobs read before it are
// answered, then the stream finishes INVALID_ARGUMENT saying which message it was (messages
// travel raw, so that a corrupt one is told apart from the client's half-close).
// Cancelling the stream (or a failed write) cancels the jobs not yet dispatched; the stream
// finishes once every started job has come back. On a server with tokens the stream needs a
// valid one, and each job takes one of its in-flight slots (a job refused one is answered
// RESOURCE_EXHAUSTED; the open stream itself holds none).
//
// Shutdown (SubmitStreams::BeginShutdown, before gRPC's own drain): a stream reads no more
// jobs; a job read after that is answered UNAVAILABLE without being run; the jobs already
// running finish and their results are written; then the stream finishes with UNAVAILABLE
// "server shutting down" (OK when the client had already half-closed and everything it sent
// was answered), so that the client reconnects elsewhere. Every job the server read gets a
// result; a job the client sent that the server never read gets none (the stream's status
// says why, and the client libraries answer it for the caller).
//
// While shutting down, the status goes out kShutdownLinger after the last result was written,
// not at once: the status is the last stream of its connection, and gRPC closes a connection
// whose last stream ends after its GOAWAY. Any byte the client sent that the server had not
// yet read (the flow-control updates that answer the last results) makes the kernel reset the
// connection on that close, and the reset throws away what the client had not yet read: the
// last results and the status (seen as "recvmsg: Connection reset by peer" under load). The
// linger lets the client read the results and the server read the client's answers first.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include <grpcpp/alarm.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/op_schedulers.h"
#include "server/service/call_timing.h"
#include "server/service/operation_calls.h"
#include "server/service/service_parts.h"

namespace gpucompute {

// The status a Submit stream finishes with when the server shuts down, and the message of a
// job read after shutdown began.
inline constexpr char kShuttingDownMessage[] = "server shutting down";

// How long a stream finishing during shutdown waits between its last result and its status
// (see above).
inline constexpr absl::Duration kShutdownLinger = absl::Milliseconds(200);

class SubmitReactor;

// The open Submit streams of one service, so that shutdown can tell each of them to finish.
// Thread-safe.
class SubmitStreams {
 public:
  SubmitStreams() = default;
  SubmitStreams(const SubmitStreams&) = delete;
  SubmitStreams& operator=(const SubmitStreams&) = delete;

  // Tells every open stream to finish (see above), and makes streams opened from now on
  // finish at once with UNAVAILABLE. Returns without waiting for them; gRPC's Shutdown does.
  void BeginShutdown();
  size_t open() const;  // streams open now

 private:
  friend class SubmitReactor;
  bool Add(SubmitReactor* stream);  // false (not added) once shutting down
  void Remove(SubmitReactor* stream);

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<SubmitReactor*> open_ ABSL_GUARDED_BY(mu_);
};

class SubmitReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading at once; deletes itself when the call is done (and no BeginShutdown holds
  // it). `streams` must outlive the call.
  SubmitReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                SubmitStreams* streams);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class SubmitStreams;
  struct Job;

  ~SubmitReactor() override;
  // The reactor is deleted when gRPC is done with it (OnDone) and BeginShutdown, which may
  // reach it from another thread meanwhile, has let go of it.
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  void Drain();  // stop reading, finish once the running jobs are written

  void Launch(std::unique_ptr<Job> job);  // runs the job's operation; JobDone follows
  // Takes a slot of the caller's token for `job`; false (after `done` with RESOURCE_EXHAUSTED
  // or UNAUTHENTICATED) when there is none.
  bool Admit(Job* job, const CallDone& done);
  void JobDone(Job* job, const absl::Status& status, const JobTimings& timings);
  // Starts the next read or write and finishes the call when the state allows; the gRPC
  // calls are made after the lock is released.
  void Step();

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  SubmitStreams* const streams_;
  Caller caller_;  // authenticated once per stream
  std::atomic<bool> cancelled_{false};
  std::atomic<int> refs_{1};  // gRPC's, until OnDone
  grpc::ByteBuffer incoming_;  // the read buffer; only touched while a read is outstanding

  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;       // launched, not yet done
  bool reading_ ABSL_GUARDED_BY(mu_) = false;    // a read is outstanding
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false; // the client half-closed, or the stream broke
  int64_t messages_read_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status corrupt_ ABSL_GUARDED_BY(mu_);    // why reading stopped at a bad message
  bool draining_ ABSL_GUARDED_BY(mu_) = false;   // the server is shutting down
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // to_write_.front() is being written
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Alarm linger_;  // finishes a stream that ends during shutdown (kShutdownLinger)
  std::deque<std::unique_ptr<Job>> to_write_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucompute
