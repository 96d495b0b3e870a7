// Unary calls and Submit streams on the gRPC callback API (generic stub, pre-serialized
// requests). No thread blocks per request: concurrency 256 is 256 calls in flight, not threads.
#include "client/load/senders.h"

#include <atomic>
#include <deque>
#include <unordered_set>

#include "absl/time/clock.h"
#include "client/cpp/client.h"
#include "client/load/wire.h"
#include "grpcpp/support/client_callback.h"

namespace gpucompute::load {
namespace {

void ConfigureCall(grpc::ClientContext& context, const std::string& client_id,
                   absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!client_id.empty()) context.AddMetadata("x-gpucompute-client", client_id);
}

int32_t OrMinus1(const std::optional<int64_t>& v) { return v ? static_cast<int32_t>(*v) : -1; }

// ---------------------------------------------------------------- unary

class UnarySender final : public Sender {
 public:
  UnarySender(const std::vector<LoadChannel>& channels, const Workload& workload,
              const LevelClock& clock, Sink& sink, const SenderOptions& options)
      : channels_(channels), workload_(workload), clock_(clock), sink_(sink), options_(options) {
    for (Op op : kAllOps) methods_[static_cast<int>(op)] = UnaryMethod(op);
  }

  int lanes() const override { return static_cast<int>(channels_.size()); }

  void Send(uint64_t token, int job, int lane) override {
    const Job& j = workload_.jobs[job];
    auto* call = new Call;
    call->token = token;
    call->request = BufferOf(j.request);
    ConfigureCall(call->context, options_.client_id, options_.timeout);
    channels_[lane % channels_.size()].stub->UnaryCall(
        &call->context, methods_[static_cast<int>(j.op)], grpc::StubOptions(), &call->request,
        &call->response, [this, call](grpc::Status status) { Done(call, status); });
  }

 private:
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request, response;
    uint64_t token = 0;
  };

  void Done(Call* call, const grpc::Status& status) {
    Outcome o;
    o.end_ns = clock_.Now();
    o.code = static_cast<int32_t>(status.error_code());
    o.response_bytes = static_cast<int64_t>(call->response.Length());
    const client::ServerTimings t =
        client::ParseServerTimings(call->context.GetServerTrailingMetadata());
    o.decode_us = t.decode_us.value_or(-1);
    o.queue_us = t.queue_us.value_or(-1);
    o.compute_us = t.compute_us.value_or(-1);
    o.total_us = t.total_us.value_or(-1);
    o.batch_requests = OrMinus1(t.batch_requests);
    const uint64_t token = call->token;
    delete call;
    sink_.Complete(token, o);
  }

  const std::vector<LoadChannel>& channels_;
  const Workload& workload_;
  const LevelClock& clock_;
  Sink& sink_;
  const SenderOptions options_;
  std::string methods_[4];
};

// ---------------------------------------------------------------- Submit stream

class StreamSender;

// One Submit stream: a queue of serialized jobs written one at a time, a read always pending,
// and the set of tokens awaiting a result (failed together if the stream ends early).
class SubmitStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  SubmitStream(StreamSender& owner, const LevelClock& clock, Sink& sink, int64_t timeout_us)
      : owner_(owner), clock_(clock), sink_(sink), timeout_us_(timeout_us) {}

  void Start(grpc::GenericStub& stub, const SenderOptions& options) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + options.stream_deadline));
    if (!options.client_id.empty()) context_.AddMetadata("x-gpucompute-client", options.client_id);
    stub.PrepareBidiStreamingCall(&context_, kSubmitMethod, grpc::StubOptions(), this);
    StartRead(&read_);
    StartCall();
  }

  bool broken() const { return broken_.load(std::memory_order_acquire); }

  void Enqueue(uint64_t token, const grpc::Slice& job) {
    {
      absl::MutexLock lock(&mu_);
      if (!done_) {
        pending_.insert(token);
        grpc::ByteBuffer buffer = SubmitBuffer(token, timeout_us_, job);
        if (writing_) {
          queue_.push_back(std::move(buffer));
        } else {
          writing_ = true;
          write_ = std::move(buffer);
          StartWrite(&write_);
        }
        return;
      }
    }
    Outcome o;
    o.code = end_code_;
    o.end_ns = clock_.Now();
    sink_.Complete(token, o);
  }

  void CloseWhenIdle() {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_ && !writes_done_ && !done_) {
      writes_done_ = true;
      StartWritesDone();
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (!ok) {  // the stream is broken; OnDone follows with the status
      writing_ = false;
      queue_.clear();
      return;
    }
    if (!queue_.empty()) {
      write_ = std::move(queue_.front());
      queue_.pop_front();
      StartWrite(&write_);
      return;
    }
    writing_ = false;
    if (closing_ && !writes_done_) {
      writes_done_ = true;
      StartWritesDone();
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the server ended the stream; OnDone follows
    Outcome o;
    o.end_ns = clock_.Now();
    o.response_bytes = static_cast<int64_t>(read_.Length());
    absl::StatusOr<SubmitResponseHead> head = ParseSubmitResponseHead(read_);
    read_.Clear();
    bool known = false;
    uint64_t token = 0;
    if (head.ok() && head->token) {
      token = *head->token;
      absl::MutexLock lock(&mu_);
      known = pending_.erase(token) > 0;
    }
    if (known) {
      o.code = head->code;
      if (head->has_timing) {
        o.queue_us = head->timing.queue_us();
        o.compute_us = head->timing.compute_us();
        o.total_us = head->timing.total_us();
        o.batch_requests = static_cast<int32_t>(head->timing.batch_requests());
      }
      sink_.Complete(token, o);
    } else {
      unmatched_.fetch_add(1, std::memory_order_relaxed);
    }
    StartRead(&read_);
  }

  void OnDone(const grpc::Status& status) override;

  int64_t unmatched() const { return unmatched_.load(); }

 private:
  StreamSender& owner_;
  const LevelClock& clock_;
  Sink& sink_;
  const int64_t timeout_us_;
  grpc::ClientContext context_;
  grpc::ByteBuffer read_;

  absl::Mutex mu_;
  grpc::ByteBuffer write_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<uint64_t> pending_ ABSL_GUARDED_BY(mu_);  // sent or queued, no result yet
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int32_t> end_code_{static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE)};
  std::atomic<bool> broken_{false};
  std::atomic<int64_t> unmatched_{0};
};

class StreamSender final : public Sender {
 public:
  StreamSender(const std::vector<LoadChannel>& channels, const Workload& workload,
               const LevelClock& clock, Sink& sink, const SenderOptions& options)
      : workload_(workload) {
    const int per_channel = std::max(1, options.streams_per_channel);
    const int64_t timeout_us = absl::ToInt64Microseconds(options.timeout);
    for (int s = 0; s < per_channel; ++s) {
      for (const LoadChannel& c : channels) {
        streams_.push_back(std::make_unique<SubmitStream>(*this, clock, sink, timeout_us));
        {
          absl::MutexLock lock(&mu_);
          ++open_;
        }
        streams_.back()->Start(*c.stub, options);
      }
    }
  }

  ~StreamSender() override { CloseAndWait(); }

  int lanes() const override { return static_cast<int>(streams_.size()); }

  void Send(uint64_t token, int job, int lane) override {
    streams_[lane % streams_.size()]->Enqueue(token, workload_.jobs[job].submit);
  }

  bool Broken(int lane) const override { return streams_[lane % streams_.size()]->broken(); }

  void CloseAndWait() override {
    for (auto& s : streams_) s->CloseWhenIdle();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* open) { return *open == 0; }, &open_));
  }

  // Called last by each stream's OnDone.
  void StreamDone() {
    absl::MutexLock lock(&mu_);
    --open_;
  }

 private:
  const Workload& workload_;
  std::vector<std::unique_ptr<SubmitStream>> streams_;
  absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

void SubmitStream::OnDone(const grpc::Status& status) {
  const int32_t code = status.ok() ? static_cast<int32_t>(grpc::StatusCode::UNKNOWN)
                                   : static_cast<int32_t>(status.error_code());
  std::unordered_set<uint64_t> lost;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    end_code_.store(code);
    broken_.store(true, std::memory_order_release);
    lost.swap(pending_);
    queue_.clear();
  }
  // Jobs without a result: the stream's status (UNKNOWN when it ended OK without them).
  for (uint64_t token : lost) {
    Outcome o;
    o.code = code;
    o.end_ns = clock_.Now();
    sink_.Complete(token, o);
  }
  owner_.StreamDone();  // last: the owner may destroy this stream from here on
}

}  // namespace

std::unique_ptr<Sender> MakeUnarySender(const std::vector<LoadChannel>& channels,
                                        const Workload& workload, const LevelClock& clock,
                                        Sink& sink, const SenderOptions& options) {
  return std::make_unique<UnarySender>(channels, workload, clock, sink, options);
}

std::unique_ptr<Sender> MakeStreamSender(const std::vector<LoadChannel>& channels,
                                         const Workload& workload, const LevelClock& clock,
                                         Sink& sink, const SenderOptions& options) {
  return std::make_unique<StreamSender>(channels, workload, clock, sink, options);
}

}  // namespace gpucompute::load
