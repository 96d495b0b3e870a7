// The Submit stream (see submit_reactor.h).
#include "server/service/submit_reactor.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/service/call_timing.h"
#include "server/service/operation_calls.h"
#include "server/transport/status_mapping.h"

namespace gpucompute {

struct SubmitReactor::Job {
  v1::SubmitRequest request;
  v1::SubmitResponse response;
  grpc::ByteBuffer wire;       // the response serialized, while it waits to be written
  absl::Time start;
  absl::Time deadline = absl::InfiniteFuture();  // the job's own, or the stream's
  const char* op = "unknown";  // the metrics' name of the operation, set at launch
  InFlightSlot slot;           // one of the token's, while the job runs
};

namespace {

// The metrics' name of a job's operation.
const char* OpName(v1::SubmitRequest::JobCase job) {
  switch (job) {
    case v1::SubmitRequest::kPeriodogram: return "periodogram";
    case v1::SubmitRequest::kDense: return "dense";
    case v1::SubmitRequest::kAssimilate: return "assimilate";
    case v1::SubmitRequest::kEcho: return "echo";
    case v1::SubmitRequest::JOB_NOT_SET: break;
  }
  return "unknown";
}

}  // namespace

// ---------------------------------------------------------------- SubmitStreams

void SubmitStreams::BeginShutdown() {
  std::vector<SubmitReactor*> open;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    open.reserve(open_.size());
    for (SubmitReactor* stream : open_) {
      stream->Ref();  // not deleted while we reach it, even if it finishes meanwhile
      open.push_back(stream);
    }
  }
  // Unlocked: a stream's Drain may finish it, and its OnDone takes mu_ to leave open_.
  for (SubmitReactor* stream : open) {
    stream->Drain();
    stream->Unref();
  }
}

size_t SubmitStreams::open() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

bool SubmitStreams::Add(SubmitReactor* stream) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return false;
  open_.insert(stream);
  return true;
}

void SubmitStreams::Remove(SubmitReactor* stream) {
  absl::MutexLock lock(&mu_);
  open_.erase(stream);
}

// ---------------------------------------------------------------- SubmitReactor

SubmitReactor::SubmitReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                             SubmitStreams* streams)
    : context_(context), parts_(parts), streams_(streams) {
  auto caller = Authenticate(*context, parts->auth);
  grpc::Status refused;
  if (!caller.ok()) {
    refused = ToGrpcStatus(caller.status());
  } else {
    caller_ = *std::move(caller);
    if (!streams_->Add(this)) {
      refused = grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDownMessage);
    }
  }
  if (!refused.ok()) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(refused);
    return;
  }
  Step();
}

SubmitReactor::~SubmitReactor() = default;

bool SubmitReactor::Admit(Job* job, const CallDone& done) {
  auto slot = TokenAuthenticator::Enter(caller_.token);
  if (!slot.ok()) {
    done(slot.status(), JobTimings{});
    return false;
  }
  job->slot = *std::move(slot);
  return true;
}

void SubmitReactor::Drain() {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  Step();
}

void SubmitReactor::OnReadDone(bool ok) {
  std::unique_ptr<Job> job;
  bool parsed = false;
  if (ok) {
    job = std::make_unique<Job>();
    job->start = absl::Now();
    parsed = grpc::SerializationTraits<v1::SubmitRequest>::Deserialize(&incoming_, &job->request).ok();
    incoming_.Clear();
  }
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    // A read still outstanding when a shutting-down stream finished: the job is not answered
    // (the stream's UNAVAILABLE tells the client it was not run).
    if (finished_) return;
    if (ok && parsed) {
      ++messages_read_;
      ++in_flight_;
    } else {
      reads_done_ = true;
      if (ok) {
        corrupt_ = absl::InvalidArgumentError(absl::StrCat(
            "Submit: message ", messages_read_ + 1, " of the stream is not a SubmitRequest (it does "
            "not parse); no more jobs are read, and the ", messages_read_,
            " read before it are answered"));
        job.reset();
      }
    }
  }
  if (job) Launch(std::move(job));
  Step();
}

void SubmitReactor::Launch(std::unique_ptr<Job> owned) {
  Job* job = owned.release();  // owned by its `done` until JobDone hands it to the writer
  const v1::SubmitRequest& r = job->request;
  CallContext call;
  call.start = job->start;
  call.deadline = ToAbslTime(context_->deadline());
  if (r.timeout_us() > 0) {
    call.deadline = std::min(call.deadline, job->start + absl::Microseconds(r.timeout_us()));
  }
  job->deadline = call.deadline;
  call.is_cancelled = [this] { return cancelled_.load(std::memory_order_relaxed); };
  call.client = caller_.id;
  const CallDone done = [this, job](const absl::Status& status, const JobTimings& timings) {
    JobDone(job, status, timings);
  };
  job->op = OpName(r.job_case());
  if (r.job_case() == v1::SubmitRequest::JOB_NOT_SET) {
    done(absl::InvalidArgumentError(
             "job: must be set to one of periodogram, dense, assimilate, echo"),
         JobTimings{});
    return;
  }
  bool draining = false;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
  }
  if (draining) {
    // Read after shutdown began: not run, so that the client may send it elsewhere.
    done(absl::UnavailableError(absl::StrCat(kShuttingDownMessage,
                                             ": job not run; submit it to another server")),
         JobTimings{});
    return;
  }
  if (!Admit(job, done)) return;
  v1::SubmitResponse* out = &job->response;
  switch (r.job_case()) {
    case v1::SubmitRequest::kPeriodogram:
      RunPeriodogram(*parts_, r.periodogram(), out->mutable_periodogram(), std::move(call), done);
      break;
    case v1::SubmitRequest::kDense:
      RunDense(*parts_, r.dense(), out->mutable_dense(), std::move(call), done);
      break;
    case v1::SubmitRequest::kAssimilate:
      RunAssimilate(*parts_, r.assimilate(), out->mutable_assimilate(), std::move(call), done);
      break;
    case v1::SubmitRequest::kEcho:
      RunEcho(*parts_, r.echo(), out->mutable_echo(), std::move(call), done);
      break;
    case v1::SubmitRequest::JOB_NOT_SET:
      break;  // answered above
  }
}

void SubmitReactor::JobDone(Job* raw, const absl::Status& status, const JobTimings& timings) {
  std::unique_ptr<Job> job(raw);
  job->slot.Release();
  RecordCallEnd(*parts_, *context_, job->op, RecordedStatus(status, cancelled_.load(), job->deadline),
                timings, job->start);
  v1::SubmitResponse& out = job->response;
  out.set_id(job->request.id());
  if (!status.ok()) {
    out.clear_result();
    out.set_code(static_cast<int>(status.code()));
    out.set_message(std::string(status.message()));
  }
  v1::JobTiming* t = out.mutable_timing();
  t->set_queue_us(absl::ToInt64Microseconds(timings.queue));
  t->set_compute_us(absl::ToInt64Microseconds(timings.compute));
  t->set_total_us(absl::ToInt64Microseconds(absl::Now() - job->start));
  t->set_batch_requests(timings.batch_requests);
  job->request.Clear();  // the inputs are no longer needed while the result waits to be written
  bool own_buffer = false;
  (void)grpc::SerializationTraits<v1::SubmitResponse>::Serialize(out, &job->wire, &own_buffer);
  out.Clear();
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    if (!cancelled_.load(std::memory_order_relaxed)) to_write_.push_back(std::move(job));
  }
  Step();
}

void SubmitReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    to_write_.pop_front();
  }
  if (!ok) cancelled_.store(true);  // the client is gone: nobody reads what is left
  Step();
}

void SubmitReactor::OnCancel() {
  cancelled_.store(true);
  Step();
}

void SubmitReactor::Step() {
  bool read = false;
  const grpc::ByteBuffer* write = nullptr;
  bool finish = false;
  bool linger = false;
  grpc::Status status;
  const bool cancelled = cancelled_.load();
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (cancelled) {
      // No more reads; drop the results nobody will read (but not the one being written).
      if (!reading_) reads_done_ = true;
      while (to_write_.size() > (writing_ ? 1u : 0u)) to_write_.pop_back();
    }
    if (!reading_ && !reads_done_ && !draining_ &&
        in_flight_ < parts_->limits.stream.max_jobs_in_flight) {
      reading_ = true;
      read = true;
    }
    if (!writing_ && !to_write_.empty()) {
      writing_ = true;
      write = &to_write_.front()->wire;
    }
    // Shutting down, the stream finishes without waiting for the client's next message: an
    // outstanding read then ends with the call (OnReadDone after finished_).
    const bool no_more_reads = (reads_done_ && !reading_) || draining_;
    if (no_more_reads && in_flight_ == 0 && !writing_ && to_write_.empty()) {
      finished_ = true;
      finish = true;
      if (cancelled) {
        status = grpc::Status(grpc::StatusCode::CANCELLED, "Submit stream cancelled");
      } else if (!corrupt_.ok()) {
        status = ToGrpcStatus(corrupt_);
      } else if (draining_ && !reads_done_) {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDownMessage);
      }
      linger = draining_ && !cancelled;
    }
  }
  if (read) StartRead(&incoming_);
  if (write) StartWrite(write);
  if (finish && linger) {
    // gRPC calls OnDone (which deletes this) only after Finish, so `this` outlives the alarm.
    linger_.Set(absl::ToChronoTime(absl::Now() + kShutdownLinger),
                [this, status](bool) { Finish(status); });
  } else if (finish) {
    Finish(status);
  }
}

void SubmitReactor::OnDone() {
  streams_->Remove(this);
  Unref();
}

}  // namespace gpucompute
