// The Submit stream: jobs of any operation in, results out as each finishes. At most
// `limits.stream.max_jobs_in_flight` jobs of a stream run at once: the next job is read only
// when one finishes, so a fast client is held back by HTTP/2 flow control instead of filling
// a queue. A job that fails is answered with its own status and the stream goes on.
// Cancelling the stream (or a failed write) cancels the jobs not yet dispatched; the stream
// finishes once every started job has come back. On a server with tokens the stream needs a
// valid one, and each job takes one of its in-flight slots (a job refused one is answered
// RESOURCE_EXHAUSTED).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include <grpcpp/support/server_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/scheduler.h"
#include "server/service/call_timing.h"
#include "server/service/operation_calls.h"
#include "server/service/service_parts.h"

namespace gpucompute {

class SubmitReactor final
    : public grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse> {
 public:
  // Starts reading at once; deletes itself when the call is done.
  SubmitReactor(grpc::CallbackServerContext* context, const ServiceParts* parts);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Job;

  void Launch(std::unique_ptr<Job> job);  // runs the job's operation; JobDone follows
  // Names the job's operation and takes a slot of the caller's token for it; false (after
  // `done` with RESOURCE_EXHAUSTED) when there is none.
  bool Admit(Job* job, const char* op, const CallDone& done);
  void JobDone(Job* job, const absl::Status& status, const JobTimings& timings);
  // Starts the next read or write and finishes the call when the state allows; the gRPC
  // calls are made after the lock is released.
  void Step();

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  Caller caller_;  // authenticated once per stream
  std::atomic<bool> cancelled_{false};
  v1::SubmitRequest incoming_;  // the read buffer; only touched while a read is outstanding

  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;       // launched, not yet done
  bool reading_ ABSL_GUARDED_BY(mu_) = false;    // a read is outstanding
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false; // the client half-closed, or the stream broke
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // to_write_.front() is being written
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<Job>> to_write_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucompute
