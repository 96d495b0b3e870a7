// A stream slot's cuFFT plans for the fast periodogram's transforms: in-place inverse complex
// FFTs (float and double) of every even size on the FFT ladder (math/fft_sizes.h) up to the
// largest a request may need. They are made when the device starts, so that no request waits
// for one: building a plan costs cuFFT's host planning, its own tables (cudaMalloc, which its
// API does not let the caller supply) and, for a size first used on a machine, the JIT
// compilation of its kernels (the driver caches them on disk: CUDA_CACHE_PATH).
//
// A size has plans for batches of 1, 16, 256, ... transforms (as long as a plan covers at most
// kLevelPoints points, and always 1): a batch of b runs as b / B executions of the largest
// (batch B) and then the remainder's base-16 digits' worth of the others. A (size, batch) that
// took more than one execution is handed to a planner thread, which builds a plan for exactly
// that batch behind the request (at most max_exact_plans; the planner's cudaMalloc and JIT run
// beside the requests, not in them): later calls run it as one execution, as fast as a plan made
// for them. No plan is ever evicted, so nothing is freed while serving.
//
// One set per stream slot: cuFFT documents thread safety only for different plans, so no plan
// serves two streams. Inverse is for the slot's holder (one thread at a time); the planner only
// adds plans, under the set's lock. Work areas come from the stream-ordered pool, one per call,
// freed behind its executions.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "math/element_type.h"
#include "server/device/cufft.h"

namespace gpucompute {

class FftPlans {
 public:
  // The most points one of a size's batched plans covers (its largest batch: 16^k <= this / size).
  static constexpr int64_t kLevelPoints = int64_t{1} << 24;
  // Plans for exact batches a set builds behind the requests by default; further batches keep
  // running on the size's batched plans (a warning is logged once).
  static constexpr int kMaxExactPlans = 256;

  // Builds the batched plans of every even ladder size up to `max_size` for both element types
  // on `device` (made current on the calling thread) and starts the planner, which builds at
  // most `max_exact_plans` (0: none, every batch on the batched plans). A plan cuFFT cannot make
  // fails the whole set, naming it.
  static absl::StatusOr<std::unique_ptr<FftPlans>> Create(int device, int64_t max_size,
                                                          int max_exact_plans = kMaxExactPlans);
  ~FftPlans();  // stops the planner; the caller has synchronised the stream that used the plans
  FftPlans(const FftPlans&) = delete;
  FftPlans& operator=(const FftPlans&) = delete;

  // Enqueues on `stream` the in-place inverse transforms (exp(+2 pi i jk / size), unnormalised)
  // of `batch` contiguous runs of `size` complex values (interleaved pairs of `dtype`) at
  // `data`, with a work area from `pool`. Makes no plan. `size` must be an even ladder size up
  // to max_size(): anything else is an internal error (the planning code chose it).
  absl::Status Inverse(ElementType dtype, int64_t size, int64_t batch, void* data,
                       cudaStream_t stream, cudaMemPool_t pool);

  int64_t max_size() const { return max_size_; }

  struct Counts {
    int64_t batched_plans = 0;       // made at start
    int64_t exact_plans = 0;         // made by the planner so far
    int64_t batched_executions = 0;  // Inverse calls run on the batched plans
    int64_t exact_executions = 0;    // Inverse calls run on an exact plan
  };
  Counts counts() const;
  // Blocks until the planner has built (or failed to build) every plan asked of it so far.
  void WaitForPlanner();

 private:
  struct Plan {
    CufftPlan plan;
    int64_t batch = 0;
  };
  // One size's batched plans, batch 1 first, and the largest work area they take.
  struct SizePlans {
    std::vector<Plan> by_batch;
    size_t work_bytes = 0;
  };
  using SizeKey = std::tuple<bool, int64_t>;            // (double, size)
  using BatchKey = std::tuple<bool, int64_t, int64_t>;  // (double, size, batch)

  FftPlans(int device, int64_t max_size, int max_exact_plans)
      : device_(device), max_size_(max_size), max_exact_plans_(max_exact_plans) {}
  absl::Status BuildBatchedPlans();
  const Plan* FindExact(const BatchKey& key) const;
  void AskPlanner(const BatchKey& key);
  void PlannerLoop();
  void BuildExact(const BatchKey& key);
  static absl::Status Execute(const Plan& p, bool f64, void* data, void* work, cudaStream_t stream);
  bool PlannerHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  }
  bool PlannerIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (queue_.empty() && building_ == 0);
  }

  const int device_;
  const int64_t max_size_;
  const int max_exact_plans_;
  absl::flat_hash_map<SizeKey, SizePlans> sizes_;  // fixed once Create returns

  mutable absl::Mutex mu_;
  absl::flat_hash_map<BatchKey, std::unique_ptr<Plan>> exact_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<BatchKey> asked_ ABSL_GUARDED_BY(mu_);  // queued, built or failed
  std::deque<BatchKey> queue_ ABSL_GUARDED_BY(mu_);
  int building_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // or the planner could not start
  bool cap_logged_ ABSL_GUARDED_BY(mu_) = false;
  std::thread planner_;

  std::atomic<int64_t> batched_executions_{0};
  std::atomic<int64_t> exact_executions_{0};
};

}  // namespace gpucompute
