// The shared workers: a queue of calls, each a count of pieces that the workers (and, for
// RunPiecesOnSharedWorkers, the caller) claim one at a time; a posted task is a call of one
// piece.
#include "common/shared_workers.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/synchronization/notification.h"
#include "common/thread_name.h"

namespace gpucompute {
namespace {

// One call. Held by shared_ptr: a worker may still hold it after its last piece has run and
// the caller has returned, but never calls `piece` then (it claims a piece first).
struct Call {
  Call(int64_t pieces, std::function<void(int64_t)> piece) : pieces(pieces), piece(std::move(piece)) {}

  // Claims and runs pieces until none is left to claim.
  void Work() {
    for (int64_t t = next.fetch_add(1); t < pieces; t = next.fetch_add(1)) {
      piece(t);
      if (done.fetch_add(1) + 1 == pieces) finished.Notify();
    }
  }
  bool Exhausted() const { return next.load() >= pieces; }

  const int64_t pieces;
  const std::function<void(int64_t)> piece;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  absl::Notification finished;
};

class Workers {
 public:
  explicit Workers(int64_t threads) : threads_(threads) {
    for (int64_t i = 0; i < threads; ++i) std::thread([this] { Loop(); }).detach();
  }

  void Run(int64_t pieces, absl::FunctionRef<void(int64_t)> piece) {
    auto call = std::make_shared<Call>(pieces, [piece](int64_t t) { piece(t); });
    Queue(call, std::min(threads_, pieces - 1));  // helpers besides the caller's first piece
    call->Work();
    Forget(call);
    call->finished.WaitForNotification();
  }

  void Post(std::function<void()> task) {
    Queue(std::make_shared<Call>(1, [task = std::move(task)](int64_t) { task(); }), 1);
  }

 private:
  void Queue(std::shared_ptr<Call> call, int64_t wake) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(std::move(call));
    }
    for (int64_t i = 0; i < wake; ++i) cv_.notify_one();
  }

  // Takes an exhausted call out of the queue (a posted task's captures are released with it).
  void Forget(const std::shared_ptr<Call>& call) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = calls_.begin(); it != calls_.end(); ++it) {
      if (*it == call) {
        calls_.erase(it);
        return;
      }
    }
  }

  void Loop() {
    NameThisThread("gc-parallel");
    for (;;) {
      std::shared_ptr<Call> call;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !calls_.empty(); });
        call = calls_.front();
        if (call->Exhausted()) {
          calls_.pop_front();
          continue;
        }
      }
      call->Work();
      Forget(call);
    }
  }

  const int64_t threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Call>> calls_;  // calls that may have pieces left, oldest first
};

// Never destroyed: detached workers may be waiting on it while the process exits.
Workers& SharedWorkers() {
  static Workers* const workers = new Workers(std::max<int64_t>(1, HardwareThreads() - 1));
  return *workers;
}

}  // namespace

void RunPiecesOnSharedWorkers(int64_t pieces, absl::FunctionRef<void(int64_t)> piece) {
  if (pieces <= 0) return;
  if (pieces == 1) {
    piece(0);
    return;
  }
  SharedWorkers().Run(pieces, piece);
}

void PostToSharedWorkers(std::function<void()> task) { SharedWorkers().Post(std::move(task)); }

}  // namespace gpucompute
