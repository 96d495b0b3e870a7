// The front's proxy (see proxy_service.h). One ProxyCall per client call; one Upstream per
// worker call it makes. Decisions are taken under the ProxyCall's mutex and the gRPC
// operations they imply are started after it is released (an operation started outside a
// reaction may run its reaction on the starting thread).
#include "server/front/proxy_service.h"

#include <deque>
#include <functional>
#include <map>
#include <set>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/front/request_route.h"
#include "server/front/response_merge.h"
#include "server/transport/caller.h"
#include "server/transport/status_mapping.h"
#include "spdlog/spdlog.h"

namespace gpucompute::front {
namespace {

// What a reaction does once it has released the ProxyCall's mutex: the reactor operations
// first, then the upstream holds it gives back. Giving back the last hold of an Upstream lets
// its OnDone run (on another thread), which may finish and delete the ProxyCall: nothing of
// it may be touched after that.
struct Actions {
  std::vector<std::function<void()>> ops;
  std::vector<std::function<void()>> releases;
  void push_back(std::function<void()> op) { ops.push_back(std::move(op)); }
  void release(std::function<void()> op) { releases.push_back(std::move(op)); }
};

void Run(Actions& actions) {
  for (auto& a : actions.ops) a();
  for (auto& a : actions.releases) a();
  actions.ops.clear();
  actions.releases.clear();
}

// Cancelling an Upstream is done under the ProxyCall's mutex: while the target still has its
// Upstream (UpDone, which needs the mutex, has not run), the object is alive, and TryCancel
// runs no reaction inline.

// Replies queued for the client before the front stops reading (a worker's stream) or
// taking requests (Submit jobs it refuses itself): HTTP/2 flow control then holds the sender.
constexpr size_t kMostQueuedReplies = 8;

// Methods whose client sends a stream (the rest send exactly one message).
bool ClientStreams(Method m) {
  return m == Method::kLoadModel || m == Method::kPutTensor || m == Method::kSubmit ||
         m == Method::kOther;
}

// Methods whose server sends a stream (the rest send exactly one message).
bool ServerStreams(Method m) {
  return m == Method::kGetTensor || m == Method::kSubmit || m == Method::kOther;
}

absl::string_view View(const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); }

class ProxyCall;

// One call to one worker, carrying ByteBuffers both ways. It holds a hold (AddHold) until the
// ProxyCall will start nothing more on it, so that OnDone cannot come first.
class Upstream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Upstream(ProxyCall* call, int target) : call_(call), target_(target) {}
  grpc::ClientContext& context() { return context_; }

  void Begin(grpc::GenericStub* stub, const std::string& method, const grpc::ByteBuffer* first,
             bool last) {
    stub->PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    AddHold();
    StartRead(&read_);
    if (first != nullptr) {
      write_ = *first;
      if (last) {
        StartWriteLast(&write_, grpc::WriteOptions());
      } else {
        StartWrite(&write_);
      }
    } else if (last) {
      StartWritesDone();
    }
    StartCall();
  }
  void Write(const grpc::ByteBuffer& message) {
    write_ = message;
    StartWrite(&write_);
  }
  void CloseWrites() { StartWritesDone(); }
  void ReadNext() { StartRead(&read_); }
  void Release() { RemoveHold(); }
  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  ProxyCall* const call_;
  const int target_;
  grpc::ClientContext context_;
  grpc::ByteBuffer write_;
  grpc::ByteBuffer read_;
};

class ProxyCall final : public grpc::ServerGenericBidiReactor {
 public:
  ProxyCall(ProxyService::Shared* shared, grpc::GenericCallbackServerContext* context)
      : shared_(shared), context_(context), method_(MethodOf(context->method())),
        fanout_(FanoutOf(method_)), start_(absl::Now()) {
    shared_->unrouted->fetch_add(1);
    Actions actions;
    {
      absl::MutexLock lock(&mu_);
      if (absl::Status s = Admit(); !s.ok()) {
        FinishLocked(ToGrpcStatus(s), actions);
      } else {
        down_reading_ = true;
        actions.push_back([this] { StartRead(&down_in_); });
      }
    }
    Run(actions);
  }

  // Reactions of the upstream calls.
  void UpWriteDone(int t, bool ok);
  void UpWritesDone(int t);
  void UpRead(int t, bool ok, grpc::ByteBuffer* message);
  void UpDone(int t, const grpc::Status& status, std::multimap<std::string, std::string> trailers);

 private:
  struct Target {
    int worker = -1;
    int incarnation = 0;
    Upstream* up = nullptr;       // null once its OnDone ran
    bool write_pending = false;
    // A WritesDone started by the ProxyCall (not by Begin) and not yet reacted to: like a
    // pending write, it keeps the hold, so that the Upstream outlives the call that starts it.
    bool close_pending = false;
    bool writes_closed = false;   // WritesDone sent, or nothing more will be written
    bool reads_ended = false;
    bool released = false;        // its hold removed
    bool read_paused = false;     // a reply is waiting for the downstream writes to drain
    bool done = false;
    grpc::Status status;
    std::vector<grpc::ByteBuffer> replies;  // methods with one reply: collected
    std::multimap<std::string, std::string> trailers;
  };

  absl::Status Admit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  void RouteLocked(bool have_first, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> ChooseWorker(const RequestFacts& facts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartTargetsLocked(bool have_first, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForwardLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseWritesLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeReleaseLocked(Target& t, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelUpstreamsLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadDownLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while an upstream write of the current request message is outstanding.
  bool WritingUpLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::any_of(targets_.begin(), targets_.end(), [](const Target& t) { return t.write_pending; });
  }
  void QueueDownLocked(grpc::ByteBuffer message, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeCompleteLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(const grpc::Status& status, Actions& actions,
                    const grpc::ByteBuffer* last = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Touches nothing of the call: it may run after the call is finished and freed.
  static void Undo(WorkerPool& pool, Method method, const std::string& caller,
                   const std::string& front_call_secret, const std::vector<int>& workers,
                   const std::string& name);
  grpc::Status WorkerLost(int worker, const grpc::Status& status) const;

  ProxyService::Shared* const shared_;
  grpc::GenericCallbackServerContext* const context_;
  const Method method_;
  const Fanout fanout_;
  const absl::Time start_;

  absl::Mutex mu_;
  Caller caller_ ABSL_GUARDED_BY(mu_);
  InFlightSlot call_slot_ ABSL_GUARDED_BY(mu_);
  std::deque<InFlightSlot> job_slots_ ABSL_GUARDED_BY(mu_);  // Submit: one per forwarded job
  bool routed_ ABSL_GUARDED_BY(mu_) = false;
  bool counted_unrouted_ = true;
  std::vector<Target> targets_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer down_in_;  // the downstream read's buffer
  grpc::ByteBuffer first_;  // the first request message: written once, before routing
  bool down_reading_ ABSL_GUARDED_BY(mu_) = false;
  bool down_half_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<grpc::ByteBuffer> down_out_ ABSL_GUARDED_BY(mu_);
  bool down_writing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer down_write_;  // the downstream write's buffer
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool read_after_drain_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // the outcome is decided
  bool finish_sent_ ABSL_GUARDED_BY(mu_) = false;  // Finish (or StartWriteAndFinish) started
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  // The name an UnloadModel or RegisterSharedMemory request gives (what the front records
  // as unloaded, or undoes when a registration half-fails).
  std::string request_name_ ABSL_GUARDED_BY(mu_);
};

void Upstream::OnWriteDone(bool ok) { call_->UpWriteDone(target_, ok); }
void Upstream::OnWritesDoneDone(bool /*ok*/) { call_->UpWritesDone(target_); }
void Upstream::OnReadDone(bool ok) { call_->UpRead(target_, ok, &read_); }
void Upstream::OnDone(const grpc::Status& status) {
  std::multimap<std::string, std::string> trailers;
  for (const auto& [key, value] : context_.GetServerTrailingMetadata()) {
    if (!absl::StartsWith(View(key), "grpc-")) trailers.emplace(View(key), View(value));
  }
  // May finish the ProxyCall (and so delete it): nothing of it is touched after.
  call_->UpDone(target_, status, std::move(trailers));
  delete this;
}

absl::Status ProxyCall::Admit() {
  const TokenAuthenticator* auth = shared_->parts.auth;
  // Like the single-process server: ServerInfo, and services other than Compute (reflection),
  // stay open.
  if (method_ == Method::kServerInfo || method_ == Method::kOther) {
    caller_ = Caller{CallerId(*context_), nullptr};
    return absl::OkStatus();
  }
  if (method_ == Method::kSubmit) {  // its jobs take the slots, one each
    auto caller = Authenticate(*context_, auth);
    if (!caller.ok()) return caller.status();
    caller_ = *std::move(caller);
    return absl::OkStatus();
  }
  auto admitted = AuthenticateAndEnter(*context_, auth);
  if (!admitted.ok()) return admitted.status();
  caller_ = std::move(admitted->first);
  call_slot_ = std::move(admitted->second);
  return absl::OkStatus();
}

void ProxyCall::OnReadDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    down_reading_ = false;
    if (finishing_) {
      // nothing: the call is ending
    } else if (!routed_ && !ok && (cancelled_ || context_->IsCancelled())) {
      // Nothing reached a worker. A client that cancelled sees no status; one whose call the
      // front's shutdown ended may retry elsewhere.
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the call ended before its request arrived (cancelled, or the "
                                "server is shutting down)"), actions);
    } else if (!routed_) {
      if (ok) first_ = down_in_;
      RouteLocked(ok, actions);
    } else if (!ok) {
      down_half_closed_ = true;
      CloseWritesLocked(actions);
    } else {
      ForwardLocked(actions);
    }
  }
  Run(actions);
}

void ProxyCall::RouteLocked(bool have_first, Actions& actions) {
  routed_ = true;
  if (counted_unrouted_) {
    shared_->unrouted->fetch_sub(1);
    counted_unrouted_ = false;
  }
  WorkerPool& pool = *shared_->parts.pool;
  if (!have_first) down_half_closed_ = true;
  if (fanout_ == Fanout::kOne) {
    const RequestFacts facts = have_first ? InspectRequest(method_, first_) : RequestFacts{};
    if (method_ == Method::kSubmit && have_first && caller_.token != nullptr) {
      // The stream's first job takes a slot like every later one.
      auto slot = TokenAuthenticator::Enter(caller_.token);
      if (!slot.ok()) {
        QueueDownLocked(SubmitErrorReply(facts.job_id, ToGrpcStatus(slot.status())), actions);
        routed_ = false;  // route on the next job
        ReadDownLocked(actions);
        return;
      }
      job_slots_.push_back(*std::move(slot));
    }
    auto worker = ChooseWorker(facts);
    if (!worker.ok()) {
      FinishLocked(ToGrpcStatus(worker.status()), actions);
      return;
    }
    Target t;
    t.worker = *worker;
    t.incarnation = pool.Incarnation(*worker);
    targets_.push_back(std::move(t));
  } else {
    for (int w : pool.ServingWorkers()) {
      Target t;
      t.worker = w;
      t.incarnation = pool.Incarnation(w);
      targets_.push_back(std::move(t));
    }
    if (targets_.empty()) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no worker is serving"), actions);
      return;
    }
    if ((method_ == Method::kUnloadModel || method_ == Method::kRegisterSharedMemory) && have_first) {
      request_name_ = NameInRequest(first_);
    }
  }
  StartTargetsLocked(have_first, actions);
}

absl::StatusOr<int> ProxyCall::ChooseWorker(const RequestFacts& facts) {
  WorkerPool& pool = *shared_->parts.pool;
  // Named tensors decide: they live on one worker.
  std::set<int> holders;
  for (int w : facts.handle_workers) {
    if (w < pool.size()) holders.insert(w);
  }
  if (holders.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the resident tensors of this request live on different workers (",
        absl::StrJoin(holders, ", "), "): a request's tensors must come from one worker; create "
        "them without handles in between, or fetch and send them inline"));
  }
  if (holders.size() == 1) {
    const int w = *holders.begin();
    if (!pool.Serving(w)) {
      return absl::UnavailableError(absl::StrCat("the resident tensors of this request are on ",
                                                 pool.Describe(w)));
    }
    return w;
  }
  const bool pins = facts.creates_tensor || facts.keeps_output;
  if (pins || method_ == Method::kSubmit) {
    const int home = shared_->homes.HomeOf(caller_.id, pool, pins);
    if (home >= 0) return home;
  }
  if (!facts.model.empty()) {
    if (int w = pool.PickLeastLoaded(&facts.model); w >= 0) return w;
    if (pool.AnyHasModel(facts.model)) {
      return absl::UnavailableError(absl::StrCat("no worker holding model \"", facts.model,
                                                 "\" is serving now"));
    }
  }
  const int w = pool.PickLeastLoaded();
  if (w < 0) return absl::UnavailableError("no worker is serving");
  return w;
}

void ProxyCall::StartTargetsLocked(bool have_first, Actions& actions) {
  WorkerPool& pool = *shared_->parts.pool;
  const bool last = !ClientStreams(method_) || down_half_closed_;
  const std::string method(context_->method());
  for (size_t i = 0; i < targets_.size(); ++i) {
    Target& t = targets_[i];
    std::shared_ptr<grpc::GenericStub> stub = pool.Stub(t.worker);
    if (stub == nullptr) {
      t.done = true;
      t.released = true;
      t.status = WorkerLost(t.worker, grpc::Status(grpc::StatusCode::UNAVAILABLE, "not serving"));
      continue;
    }
    auto* up = new Upstream(this, static_cast<int>(i));
    t.up = up;
    pool.CallStarted(t.worker);
    grpc::ClientContext& c = up->context();
    for (const auto& [key, value] : context_->client_metadata()) {
      if (PassedOnMetadata(View(key))) c.AddMetadata(std::string(View(key)), std::string(View(value)));
    }
    c.AddMetadata(kClientIdKey, caller_.id);
    if (!shared_->parts.front_call_secret.empty()) c.AddMetadata(kFrontCallKey, shared_->parts.front_call_secret);
    if (context_->deadline() != std::chrono::system_clock::time_point::max()) {
      c.set_deadline(context_->deadline());
    }
    if (have_first) t.write_pending = true;
    if (last) t.writes_closed = true;
    // The stub keeps its channel; the call keeps a reference to the channel it started on.
    actions.push_back([up, stub, method, have_first, last, this] {
      up->Begin(stub.get(), method, have_first ? &first_ : nullptr, last);
    });
  }
  if (std::all_of(targets_.begin(), targets_.end(), [](const Target& t) { return t.done; })) {
    MaybeCompleteLocked(actions);
  }
}

void ProxyCall::ForwardLocked(Actions& actions) {
  grpc::ByteBuffer message = down_in_;
  if (method_ == Method::kSubmit && caller_.token != nullptr) {
    auto slot = TokenAuthenticator::Enter(caller_.token);
    if (!slot.ok()) {
      const RequestFacts facts = InspectRequest(method_, message);
      QueueDownLocked(SubmitErrorReply(facts.job_id, ToGrpcStatus(slot.status())), actions);
      ReadDownLocked(actions);
      return;
    }
    job_slots_.push_back(*std::move(slot));
  }
  for (Target& t : targets_) {
    if (t.up == nullptr || t.writes_closed || t.reads_ended) continue;
    t.write_pending = true;
    Upstream* up = t.up;
    actions.push_back([up, message] { up->Write(message); });
  }
  if (!WritingUpLocked() && !finishing_) {
    // Every worker call has ended: read no further; the call completes with their status.
    MaybeCompleteLocked(actions);
  }
}

void ProxyCall::CloseWritesLocked(Actions& actions) {
  for (Target& t : targets_) {
    if (t.up == nullptr || t.writes_closed) continue;
    if (t.write_pending) continue;  // closed when that write completes
    t.writes_closed = true;
    Upstream* up = t.up;
    if (!t.reads_ended) {
      t.close_pending = true;
      actions.push_back([up] { up->CloseWrites(); });
    }
    MaybeReleaseLocked(t, actions);
  }
}

void ProxyCall::MaybeReleaseLocked(Target& t, Actions& actions) {
  if (t.released || t.up == nullptr) return;
  if (!t.reads_ended || t.write_pending || t.close_pending) return;
  t.writes_closed = true;
  t.released = true;
  Upstream* up = t.up;
  actions.release([up] { up->Release(); });
}

void ProxyCall::CancelUpstreamsLocked(Actions& actions) {
  for (Target& t : targets_) {
    Upstream* up = t.up;
    if (up == nullptr || t.released) continue;  // released: its call is ending by itself
    up->Cancel();
    if (t.read_paused) {  // its read ends (cancelled), so that the call can end
      t.read_paused = false;
      actions.push_back([up] { up->ReadNext(); });
    }
  }
}

// The next downstream read, unless replies the front made itself (Submit jobs refused) are
// piling up: then OnWriteDone reads once they drain.
void ProxyCall::ReadDownLocked(Actions& actions) {
  // Not once the client is gone: the call ends with the workers' calls, and a read started
  // after a Finish that another thread decided meanwhile would have nothing to do.
  if (down_reading_ || finishing_ || down_half_closed_ || cancelled_) return;
  if (down_out_.size() >= kMostQueuedReplies) {
    read_after_drain_ = true;
    return;
  }
  down_reading_ = true;
  actions.push_back([this] { StartRead(&down_in_); });
}

void ProxyCall::UpWriteDone(int index, bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    Target& t = targets_[index];
    t.write_pending = false;
    if (!ok) t.writes_closed = true;  // the worker's side has ended; its status will tell
    if (down_half_closed_ && !t.writes_closed && !t.reads_ended) {
      t.writes_closed = true;
      t.close_pending = true;
      Upstream* up = t.up;
      actions.push_back([up] { up->CloseWrites(); });
    }
    MaybeReleaseLocked(t, actions);
    if (!WritingUpLocked() && ClientStreams(method_)) ReadDownLocked(actions);
  }
  Run(actions);
}

void ProxyCall::UpWritesDone(int index) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    Target& t = targets_[index];
    t.close_pending = false;
    MaybeReleaseLocked(t, actions);
  }
  Run(actions);
}

void ProxyCall::UpRead(int index, bool ok, grpc::ByteBuffer* message) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    Target& t = targets_[index];
    if (!ok) {
      t.reads_ended = true;
      MaybeReleaseLocked(t, actions);
    } else if (ServerStreams(method_) && fanout_ == Fanout::kOne) {
      if (method_ == Method::kSubmit && !job_slots_.empty()) job_slots_.pop_front();  // a job ended
      QueueDownLocked(std::move(*message), actions);
      *message = grpc::ByteBuffer();
      if (down_out_.size() < kMostQueuedReplies) {
        Upstream* up = t.up;
        actions.push_back([up] { up->ReadNext(); });
      } else {
        t.read_paused = true;
      }
    } else {
      t.replies.push_back(std::move(*message));
      *message = grpc::ByteBuffer();
      Upstream* up = t.up;
      actions.push_back([up] { up->ReadNext(); });
    }
  }
  Run(actions);
}

void ProxyCall::UpDone(int index, const grpc::Status& status,
                       std::multimap<std::string, std::string> trailers) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    Target& t = targets_[index];
    t.done = true;
    t.up = nullptr;
    t.status = WorkerLost(t.worker, status);
    t.trailers = std::move(trailers);
    shared_->parts.pool->CallEnded(t.worker);
    MaybeCompleteLocked(actions);
  }
  Run(actions);
}

// A worker that went away mid-call (a device fault, a crash) leaves a transport error: say so.
grpc::Status ProxyCall::WorkerLost(int worker, const grpc::Status& status) const {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
  if (shared_->parts.pool->Serving(worker)) return status;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat(shared_->parts.pool->Describe(worker), " (", status.error_message(), ")"));
}

void ProxyCall::QueueDownLocked(grpc::ByteBuffer message, Actions& actions) {
  down_out_.push_back(std::move(message));
  if (!down_writing_ && !finish_sent_) {
    down_writing_ = true;
    down_write_ = std::move(down_out_.front());
    down_out_.pop_front();
    actions.push_back([this] { StartWrite(&down_write_); });
  }
}

void ProxyCall::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    down_writing_ = false;
    if (!ok) {
      // The client is gone: cancel the workers' calls; the call ends when they have.
      cancelled_ = true;
      down_out_.clear();
      CancelUpstreamsLocked(actions);
    } else if (!down_out_.empty()) {
      down_writing_ = true;
      down_write_ = std::move(down_out_.front());
      down_out_.pop_front();
      actions.push_back([this] { StartWrite(&down_write_); });
    }
    if (down_out_.size() < kMostQueuedReplies) {
      for (Target& t : targets_) {
        if (t.read_paused && t.up != nullptr) {
          t.read_paused = false;
          Upstream* up = t.up;
          actions.push_back([up] { up->ReadNext(); });
        }
      }
    }
    if (read_after_drain_ && down_out_.size() < kMostQueuedReplies) {
      read_after_drain_ = false;
      ReadDownLocked(actions);
    }
    if (finishing_ && !finish_sent_ && !down_writing_) {  // a Finish waiting for the writes
      finish_sent_ = true;
      actions.push_back([this, status = final_status_] { Finish(status); });
    } else {
      MaybeCompleteLocked(actions);
    }
  }
  Run(actions);
}

void ProxyCall::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    CancelUpstreamsLocked(actions);
  }
  Run(actions);
}

void ProxyCall::MaybeCompleteLocked(Actions& actions) {
  if (finishing_ || !routed_) return;
  for (const Target& t : targets_) {
    if (!t.done) return;
  }
  if (down_writing_ || !down_out_.empty()) return;  // streamed replies still going out
  CompleteLocked(actions);
}

void ProxyCall::CompleteLocked(Actions& actions) {
  WorkerPool& pool = *shared_->parts.pool;
  if (fanout_ == Fanout::kOne) {
    Target& t = targets_.front();
    for (const auto& [key, value] : t.trailers) context_->AddTrailingMetadata(key, value);
    if (!ServerStreams(method_) && t.status.ok() && !t.replies.empty()) {
      FinishLocked(t.status, actions, &t.replies.front());
    } else {
      FinishLocked(t.status, actions);
    }
    return;
  }
  std::vector<WorkerReply> replies;
  for (Target& t : targets_) {
    WorkerReply r;
    r.worker = t.worker;
    r.device_index = t.worker < static_cast<int>(shared_->parts.device_index_of_worker.size())
                         ? shared_->parts.device_index_of_worker[t.worker] : -1;
    r.status = t.status;
    r.messages = t.replies;
    replies.push_back(std::move(r));
  }
  MergedReply merged = MergeReplies(method_, replies, pool.Snapshot(),
                                    shared_->parts.device_index_of_worker);
  // What the workers now hold, and undoing a half-done LoadModel / RegisterSharedMemory.
  if (method_ == Method::kLoadModel || method_ == Method::kRegisterSharedMemory) {
    std::string name = request_name_;
    std::vector<int> succeeded;
    for (const Target& t : targets_) {
      if (!t.status.ok() || t.replies.empty()) continue;
      if (method_ == Method::kLoadModel) name = ModelNameOf(t.replies.front());
      succeeded.push_back(t.worker);
    }
    if (merged.status.ok() && method_ == Method::kLoadModel) {
      for (const Target& t : targets_) pool.AddModel(t.worker, t.incarnation, name);
    } else if (!merged.status.ok() && !succeeded.empty() && !name.empty()) {
      actions.push_back([pool = &pool, method = method_, caller = caller_.id, succeeded, name,
                         secret = shared_->parts.front_call_secret] {
        Undo(*pool, method, caller, secret, succeeded, name);
      });
    }
  } else if (method_ == Method::kUnloadModel && merged.status.ok()) {
    for (const Target& t : targets_) pool.RemoveModel(t.worker, request_name_);
  }
  FinishLocked(merged.status, actions, merged.has_message ? &merged.message : nullptr);
}

// Unloads a model (or unregisters a region) on the workers where it succeeded while another
// failed, so that nothing is half-loaded. Fire and forget: a worker that fails this too keeps
// the copy until it is unloaded by name.
void ProxyCall::Undo(WorkerPool& pool, Method method, const std::string& caller,
                     const std::string& front_call_secret, const std::vector<int>& workers,
                     const std::string& name) {
  for (int w : workers) {
    std::shared_ptr<grpc::GenericStub> stub = pool.Stub(w);
    if (stub == nullptr) continue;
    struct Undoing {
      grpc::ClientContext context;
      grpc::ByteBuffer request, response;
      std::shared_ptr<grpc::GenericStub> stub;
    };
    auto* u = new Undoing;
    u->stub = stub;
    u->request = UndoRequest(method, name);
    u->context.AddMetadata(kClientIdKey, caller);
    if (!front_call_secret.empty()) u->context.AddMetadata(kFrontCallKey, front_call_secret);
    u->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stub->UnaryCall(&u->context, UndoMethod(method), grpc::StubOptions(), &u->request,
                    &u->response, [u, w, name](grpc::Status s) {
                      if (!s.ok()) {
                        spdlog::warn("could not undo \"{}\" on worker {}: {}", name, w, s.error_message());
                      }
                      delete u;
                    });
    if (method == Method::kLoadModel) pool.RemoveModel(w, name);
  }
}

void ProxyCall::FinishLocked(const grpc::Status& status, Actions& actions,
                             const grpc::ByteBuffer* last) {
  if (finishing_) return;
  finishing_ = true;
  final_status_ = status;
  if (counted_unrouted_) {
    shared_->unrouted->fetch_sub(1);
    counted_unrouted_ = false;
  }
  // Slots are given back before the reply, as in the single-process server: the caller's
  // next call may take them.
  call_slot_.Release();
  job_slots_.clear();
  if (auto* calls = shared_->parts.calls) {
    calls->WithLabels({MethodLabel(method_),
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))})
        .Increment();
  }
  if (down_writing_ || !down_out_.empty()) {
    // Replies made by the front (Submit jobs refused) are still going out: OnWriteDone
    // finishes once they have (only calls without a reply of their own get here so).
    if (last != nullptr) down_out_.push_back(*last);
    return;
  }
  finish_sent_ = true;
  if (last != nullptr && !cancelled_) {
    down_write_ = *last;
    actions.push_back([this, status] { StartWriteAndFinish(&down_write_, grpc::WriteOptions(), status); });
  } else {
    actions.push_back([this, status] { Finish(status); });
  }
}

void ProxyCall::OnDone() { delete this; }

}  // namespace

int ClientHomes::HomeOf(const std::string& client, WorkerPool& pool, bool assign) {
  absl::MutexLock lock(&mu_);
  if (auto it = homes_.find(client); it != homes_.end()) {
    const auto [worker, incarnation] = it->second;
    if (pool.Serving(worker) && pool.Incarnation(worker) == incarnation) return worker;
    homes_.erase(it);
  }
  if (!assign) return -1;
  const int worker = pool.PickLeastLoaded();
  if (worker < 0) return -1;
  // A hint, not state: tensors are found by their handles' prefix. Bounded all the same.
  if (homes_.size() >= 65536) homes_.clear();
  homes_[client] = {worker, pool.Incarnation(worker)};
  return worker;
}

grpc::ServerGenericBidiReactor* ProxyService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  return new ProxyCall(&shared_, context);
}

}  // namespace gpucompute::front
