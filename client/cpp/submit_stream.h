// gpucompute::client::SubmitStream: one Submit call, jobs of any operation in, results out as
// each finishes (out of order). Opened by Client::OpenSubmitStream.
//
// Submit() never blocks: jobs are queued here and written one at a time, in order; the server
// reads the next job only when fewer than its max_jobs_in_flight are running, so under a fast
// writer the queue here is what grows (pending_writes() tells how much). Results arrive on a
// gRPC thread through the callback given at open; keep it short. Thread-safe.
//
// Every job Submit() accepted gets exactly one result callback. When the stream ends without
// a job's result (the server shut down: UNAVAILABLE "server shutting down"; the connection
// broke; a cancel or deadline), the callback gets a result with the stream's status code and
// a message saying so: for UNAVAILABLE the server did not run the job (or its result was
// lost with the connection), so send it again, to another server. These come before Wait()
// returns.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::client {

class SubmitStream final : public grpc::ClientBidiReactor<v1::SubmitRequest, v1::SubmitResponse> {
 public:
  // Called once per job, with code/message set when the job failed.
  using ResultCallback = std::function<void(v1::SubmitResponse&& result)>;

  ~SubmitStream() override;  // Cancel() unless finished, then waits for the call to end

  // Queues one job (its id is the caller's tag for matching the result). OK, or (and then no
  // callback for it) FAILED_PRECONDITION after Close(), or the stream's final status once it
  // has ended (UNAVAILABLE when the server shut down: open a new stream).
  absl::Status Submit(v1::SubmitRequest job);
  // No more jobs: the server finishes the stream after the last result.
  void Close();
  // Ends the call now; the server cancels the jobs it has not started.
  void Cancel();
  // Blocks until the call has ended; its final status (CANCELLED after Cancel()).
  absl::Status Wait();

  int64_t pending_writes() const;
  int64_t results_received() const;

  // gRPC reactions.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  friend class Client;
  explicit SubmitStream(ResultCallback on_result);
  void Start(v1::Compute::Stub* stub);
  // Starts the next write or WritesDone when none is in flight; gRPC is called unlocked.
  void WriteNext();

  grpc::ClientContext context_;
  const ResultCallback on_result_;
  v1::SubmitResponse incoming_;

  mutable absl::Mutex mu_;
  std::deque<v1::SubmitRequest> to_write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: the call is ending
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  // Ids of jobs accepted by Submit without a result yet, with their counts (ids may repeat).
  absl::flat_hash_map<std::string, int> unanswered_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // OnDone has run
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  std::promise<absl::Status> done_;
  std::shared_future<absl::Status> finished_;
};

}  // namespace gpucompute::client
