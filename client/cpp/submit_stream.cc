// SubmitStream (see submit_stream.h).
#include "client/cpp/submit_stream.h"

#include <utility>

#include "client/cpp/client.h"

namespace gpucompute::client {

SubmitStream::SubmitStream(ResultCallback on_result)
    : on_result_(std::move(on_result)), finished_(done_.get_future().share()) {}

SubmitStream::~SubmitStream() {
  if (finished_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) Cancel();
  finished_.wait();
}

void SubmitStream::Start(v1::Compute::Stub* stub) {
  stub->async()->Submit(&context_, this);
  StartRead(&incoming_);
  StartCall();
}

absl::Status SubmitStream::Submit(v1::SubmitRequest job) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) {
      return end_status_.ok() ? absl::FailedPreconditionError("Submit after the stream ended")
                              : end_status_;
    }
    if (closed_) return absl::FailedPreconditionError("Submit after Close()");
    ++unanswered_[job.id()];
    // A write failed: the call is ending and OnDone answers the job with its status.
    if (broken_) return absl::OkStatus();
    to_write_.push_back(std::move(job));
  }
  WriteNext();
  return absl::OkStatus();
}

void SubmitStream::Close() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  WriteNext();
}

void SubmitStream::Cancel() { context_.TryCancel(); }

absl::Status SubmitStream::Wait() { return finished_.get(); }

int64_t SubmitStream::pending_writes() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(to_write_.size());
}

int64_t SubmitStream::results_received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

void SubmitStream::WriteNext() {
  const v1::SubmitRequest* write = nullptr;
  bool writes_done = false;
  {
    absl::MutexLock lock(&mu_);
    if (writing_ || broken_) return;
    if (!to_write_.empty()) {
      writing_ = true;
      write = &to_write_.front();
    } else if (closed_ && !writes_done_sent_) {
      writes_done_sent_ = true;
      writes_done = true;
    }
  }
  if (write) StartWrite(write);
  if (writes_done) StartWritesDone();
}

void SubmitStream::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    to_write_.pop_front();
    if (!ok) {
      broken_ = true;  // OnDone follows with the call's status
      to_write_.clear();
    }
  }
  WriteNext();
}

void SubmitStream::OnReadDone(bool ok) {
  if (!ok) return;  // the server finished (or the call broke): OnDone follows
  {
    absl::MutexLock lock(&mu_);
    ++received_;
    if (auto it = unanswered_.find(incoming_.id()); it != unanswered_.end() && --it->second == 0) {
      unanswered_.erase(it);
    }
  }
  on_result_(std::move(incoming_));
  incoming_.Clear();
  StartRead(&incoming_);
}

void SubmitStream::OnDone(const grpc::Status& status) {
  const absl::Status end = ToAbslStatus(status);
  absl::flat_hash_map<std::string, int> unanswered;
  {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    end_status_ = end;
    unanswered.swap(unanswered_);
    to_write_.clear();
  }
  // Jobs without a result: the stream's status (UNKNOWN should it have ended OK without them).
  const int code = status.ok() ? static_cast<int>(grpc::StatusCode::UNKNOWN)
                               : static_cast<int>(status.error_code());
  const std::string message =
      status.ok() ? std::string("no result: the stream ended without one")
                  : "no result: the stream ended with " + end.ToString();
  for (const auto& [id, count] : unanswered) {
    for (int i = 0; i < count; ++i) {
      v1::SubmitResponse result;
      result.set_id(id);
      result.set_code(code);
      result.set_message(message);
      on_result_(std::move(result));
    }
  }
  done_.set_value(end);
}

std::unique_ptr<SubmitStream> Client::OpenSubmitStream(SubmitStream::ResultCallback on_result,
                                                       CallOptions options) {
  // A stream is one call: on a balanced client, to the next server (its jobs must not name
  // resident tensors, which live on one server: open it on Pin() for those).
  if (Client* member = Next()) return member->OpenSubmitStream(std::move(on_result), std::move(options));
  std::unique_ptr<SubmitStream> stream(new SubmitStream(std::move(on_result)));
  if (!options.deadline && !options.timeout) options.timeout = absl::InfiniteDuration();
  Configure(options, &stream->context_);
  stream->Start(stub_.get());
  return stream;
}

}  // namespace gpucompute::client
