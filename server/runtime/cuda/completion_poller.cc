// Event polling for finished batches (see completion_poller.h).
#include "server/runtime/cuda/completion_poller.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// A short pause between polling rounds: the spinning thread leaves the core's pipeline and
// the driver's locks to the threads enqueueing work.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

thread_local bool on_poller_thread = false;

}  // namespace

bool CompletionPoller::OnPollerThread() { return on_poller_thread; }

CompletionPoller::CompletionPoller(CompletionQueue* completions, int device)
    : completions_(completions), device_(device) {
  thread_ = std::thread([this] {
    NameThisThread(absl::StrCat("gc-poller-", device_));
    on_poller_thread = true;
    if (cudaSetDevice(device_) != cudaSuccess) {  // its events' queries, and its launches'
      (void)cudaGetLastError();
      spdlog::error("completion poller: cannot make device {} current", device_);
    }
    Loop();
  });
}

CompletionPoller::~CompletionPoller() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void CompletionPoller::Watch(cudaEvent_t event, std::function<void(cudaError_t)> finish) {
  absl::MutexLock lock(&mu_);
  incoming_.push_back(Watched{event, std::move(finish)});
  has_incoming_.store(true, std::memory_order_release);
}

bool CompletionPoller::RunIfAwake(std::function<void()> launch) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    launch();
    return true;
  }
  if (!awake_.load(std::memory_order_acquire)) return false;
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  // Had the thread gone to sleep meanwhile, this wakes it: the launch runs, a little later.
  launches_.push_back(std::move(launch));
  has_incoming_.store(true, std::memory_order_release);
  return true;
}

bool CompletionPoller::RunIfIdle(std::function<void()> task) {
  if (!awake_.load(std::memory_order_acquire) || !idle_.exchange(false, std::memory_order_acq_rel)) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  has_incoming_.store(true, std::memory_order_release);
  return true;
}

bool CompletionPoller::TakeNew(std::vector<Watched>* watched,
                               std::vector<std::function<void()>>* launches,
                               std::vector<std::function<void()>>* tasks, absl::Time idle_since) {
  absl::MutexLock lock(&mu_);
  if (watched->empty() && incoming_.empty() && launches_.empty() && tasks_.empty()) {
    if (stopping_) return false;
    if (absl::Now() - idle_since >= kLinger) {
      awake_.store(false, std::memory_order_relaxed);
      mu_.Await(absl::Condition(
          +[](CompletionPoller* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->incoming_.empty() || !p->launches_.empty() ||
                   !p->tasks_.empty();
          },
          this));
      if (incoming_.empty() && launches_.empty() && tasks_.empty()) return false;  // stopping
    }
  }
  for (Watched& w : incoming_) watched->push_back(std::move(w));
  incoming_.clear();
  launches->swap(launches_);
  tasks->swap(tasks_);
  has_incoming_.store(false, std::memory_order_relaxed);
  idle_.store(false, std::memory_order_relaxed);
  return true;
}

void CompletionPoller::PollOnce(std::vector<Watched>* watched) {
  for (size_t i = 0; i < watched->size();) {
    Watched& w = (*watched)[i];
    const cudaError_t status = cudaEventQuery(w.event);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: leave nothing behind for the next call
      ++i;
      continue;
    }
    if (status != cudaSuccess) (void)cudaGetLastError();
    std::function<void(cudaError_t)> finish = std::move(w.finish);
    (*watched)[i] = std::move(watched->back());
    watched->pop_back();
    if (watched->empty()) {
      finish(status);  // the only batch in flight: its caller waits for nothing else
    } else {
      completions_->Post([finish = std::move(finish), status] { finish(status); });
    }
  }
}

void CompletionPoller::Loop() {
  std::vector<Watched> watched;
  std::vector<std::function<void()>> launches, tasks;
  absl::Time idle_since = absl::Now();
  for (;;) {
    // The lock only when there is news, or to go to sleep (or stop) once the linger is over.
    const bool lingering = watched.empty() && absl::Now() - idle_since < kLinger;
    awake_.store(true, std::memory_order_release);  // TakeNew clears it before sleeping
    if (has_incoming_.load(std::memory_order_acquire) || (watched.empty() && !lingering)) {
      if (!TakeNew(&watched, &launches, &tasks, idle_since)) return;
      if (!launches.empty() || !tasks.empty()) {
        for (auto& launch : launches) launch();  // each Watches its batch (this device's)
        launches.clear();
        awake_.store(false, std::memory_order_release);  // launches meanwhile: not behind a call
        for (auto& task : tasks) task();
        tasks.clear();
        if (watched.empty() && !has_incoming_.load(std::memory_order_acquire)) {
          idle_since = absl::Now();  // a call that launched nothing: linger from here
          idle_.store(true, std::memory_order_release);
        }
        continue;
      }
    }
    if (!watched.empty()) {
      PollOnce(&watched);
      if (watched.empty()) {
        idle_since = absl::Now();
        idle_.store(true, std::memory_order_release);
      }
    }
    CpuRelax();
  }
}

}  // namespace gpucompute
