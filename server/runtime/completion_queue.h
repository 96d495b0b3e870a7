// Completion threads: backends post finished work here (the CUDA completion poller under
// load, a CPU worker); the closures split batch results and finish gRPC calls. Closures must not block.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpucompute {

class CompletionQueue {
 public:
  explicit CompletionQueue(int threads = 1);
  // Runs every closure already posted, then joins the threads.
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Thread-safe; callable from a CUDA host function (it makes no CUDA call).
  void Post(std::function<void()> fn);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpucompute
