// Completion threads (see completion_queue.h).
#include "server/runtime/completion_queue.h"

#include "common/thread_name.h"

namespace gpucompute {

CompletionQueue::CompletionQueue(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      NameThisThread("gc-completion");
      Loop();
    });
  }
}

CompletionQueue::~CompletionQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
}

void CompletionQueue::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

void CompletionQueue::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CompletionQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stopping_ || !q->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace gpucompute
