// How the CUDA backend learns that a batch has finished: an event recorded on the batch's
// stream after its last copy, polled by one thread. A small call's reply leaves within a
// microsecond or two of the GPU finishing, where a stream callback first waits for the
// driver's callback thread and then for a completion thread to wake (tens to hundreds of
// microseconds on the GPU machine, most of a small call's server time).
//
// Each GPU has a poller of its own (its thread `gc-poller-<device>`), so that two GPUs'
// batches are watched, finished and launched side by side. The poller thread spins while
// batches are in flight, polling their events (cudaEventQuery), and for kLinger after the last
// one finishes, so that the next call of a steady stream of calls finds it awake; then it
// sleeps until the next Watch. So a server keeps a core busy per GPU in use, and none when
// idle. A finished batch is finished on the poller thread when it was the only one watched
// (the latency case), else handed to the completion threads (under load, so that one long
// unpack does not hold up the others).
//
// While it is awake (watching, or lingering), the thread also takes its device's launches
// (RunIfAwake), between polling rounds: a small batch's CUDA calls cost about half as much on
// this hot core, whose caches still hold the driver's state, as on a gRPC thread that has
// just woken up (tests/bench/launch_bench); and under load each GPU's batches are launched on
// its own poller, side by side, instead of one after another by the scheduler's dispatcher
// (which then only forms batches; on 2 x H100 it had become the limit with two GPUs).
//
// While it is awake with nothing in flight and nothing queued (lingering), it also takes a
// whole small call (RunIfIdle): parsing, decoding and launching it there instead of on the
// gRPC thread that received it: a 1,000-sample periodogram's parse and decode took 39 us of
// its 98 us of server time on a gRPC thread woken by the call, 15 us here (10 us in a hot
// loop: tests/bench/decode_bench). A task must not wait for a stream slot here (only the
// pollers give slots back): CudaBackend::Run, on a poller thread (OnPollerThread), takes one
// with DeviceContext::AcquireSlotThen, which launches where the next slot is released.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/runtime/completion_queue.h"

namespace gpucompute {

class CompletionPoller {
 public:
  // How long the thread keeps spinning after the last watched batch finished.
  static constexpr absl::Duration kLinger = absl::Milliseconds(2);

  // Watches batches of CUDA device `device`. `completions` must outlive the poller. Starts
  // the thread.
  CompletionPoller(CompletionQueue* completions, int device);
  // Waits until every watched event has completed (each `finish` called), then joins.
  ~CompletionPoller();
  CompletionPoller(const CompletionPoller&) = delete;
  CompletionPoller& operator=(const CompletionPoller&) = delete;

  // Calls `finish` exactly once after `event` (recorded on a stream of this poller's device)
  // has completed: with cudaSuccess, or with the error that stopped the stream (a sticky
  // fault). `event` must stay unrecorded until then. Thread-safe; `finish` may make CUDA calls.
  void Watch(cudaEvent_t event, std::function<void(cudaError_t)> finish);

  // Runs `launch` soon on the poller thread if that thread is awake (watching batches or
  // lingering); returns false, without running it, when it is asleep (waking it would cost
  // more than the launch saves). `launch` must not block (it is to enqueue work on this
  // poller's device and Watch it). Called on the poller thread itself, runs it at once.
  // Thread-safe.
  bool RunIfAwake(std::function<void()> launch);

  // Runs `task` soon on the poller thread if that thread is awake with no batch in flight and
  // no task queued, claiming it (a second caller is refused until the thread is idle again);
  // returns false, without running it, otherwise. `task` must not block. While it runs, the
  // thread counts as asleep for RunIfAwake (other launches do not queue behind it). Thread-safe.
  bool RunIfIdle(std::function<void()> task);

  // Whether the calling thread is a CompletionPoller's (of any device).
  static bool OnPollerThread();

 private:
  struct Watched {
    cudaEvent_t event;
    std::function<void(cudaError_t)> finish;
  };

  void Loop();
  // Takes what Watch, RunIfAwake and RunIfIdle added; blocks first when nothing is watched
  // and the linger has passed. False when stopping with nothing left.
  bool TakeNew(std::vector<Watched>* watched, std::vector<std::function<void()>>* launches,
               std::vector<std::function<void()>>* tasks, absl::Time idle_since);
  // Polls each watched event once; finishes and removes the completed ones.
  void PollOnce(std::vector<Watched>* watched);

  CompletionQueue* const completions_;
  const int device_;
  absl::Mutex mu_;
  std::vector<Watched> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> launches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);  // RunIfIdle's
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Read unlocked by the spinning thread: something in incoming_, launches_ or tasks_.
  std::atomic<bool> has_incoming_{false};
  // Set by the poller thread while it is awake (not about to sleep or sleeping).
  std::atomic<bool> awake_{false};
  // Set by the poller thread when it has nothing watched and no task left; cleared by the
  // RunIfIdle that claims it and when it takes work.
  std::atomic<bool> idle_{false};
  std::thread thread_;
};

}  // namespace gpucompute
