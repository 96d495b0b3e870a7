// One device's cuFFT plans for the fast periodogram's transforms: in-place inverse complex FFTs
// (float and double) of every size on the FFT ladder (math/fft_sizes.h) up to the largest a
// request may need. They are made when the device starts, so that no request builds one:
// building a plan costs cuFFT's host planning, its own tables (cudaMalloc, which its API does
// not let the caller supply) and, for a size first used in the process, its kernels' JIT
// compilation (0.1-0.4 s; the driver caches them on disk, CUDA_CACHE_PATH).
//
// A size has plans for batches of 1, 16, 256, ... transforms (as long as a plan covers at most
// 2^20 points, and always 1): a batch of b runs as b's base-16 digits' worth of executions,
// largest first. A (size, batch) seen for the first time is also handed to a planner thread,
// which builds a plan for exactly that batch behind the request (at most kMaxExactPlans a
// device by default): later calls run it as one execution, as fast as a plan made for them. Plans are
// never evicted, so nothing is freed while serving. The device's stream slots share them: an
// execution holds the plan's lock while it binds its stream and work area (taken from the
// stream-ordered pool, freed behind the execution) and launches; the tables are read-only, so
// executions on several streams may overlap on the device.
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
  static constexpr int64_t kLevelPoints = int64_t{1} << 20;
  // Plans for exact batches a device builds behind the requests by default; further batches
  // keep running on the size's batched plans.
  static constexpr int kMaxExactPlans = 256;

  // Builds the batched plans of every ladder size up to `max_size` for both element types on
  // `device` (made current on the calling thread) and starts the planner, which builds at most
  // `max_exact_plans` (0: none, every batch on the batched plans).
  static absl::StatusOr<std::unique_ptr<FftPlans>> Create(int device, int64_t max_size,
                                                          int max_exact_plans = kMaxExactPlans);
  ~FftPlans();  // stops the planner; the caller has synchronised the streams that used the plans
  FftPlans(const FftPlans&) = delete;
  FftPlans& operator=(const FftPlans&) = delete;

  // Enqueues on `stream` the in-place inverse transforms (exp(+2 pi i jk / size), unnormalised)
  // of `batch` contiguous runs of `size` complex values (interleaved pairs of `dtype`) at
  // `data`, with work areas from `pool`. Makes no plan. `size` must be a ladder size up to
  // max_size(): anything else is an internal error (the planning code chose it).
  absl::Status Inverse(ElementType dtype, int64_t size, int64_t batch, void* data,
                       cudaStream_t stream, cudaMemPool_t pool);

  int64_t max_size() const { return max_size_; }

  struct Counts {
    int64_t batched_plans = 0;      // made at start
    int64_t exact_plans = 0;        // made by the planner so far
    int64_t batched_executions = 0;  // Inverse calls run on the batched plans
    int64_t exact_executions = 0;    // Inverse calls run on an exact plan
  };
  Counts counts() const;
  // Blocks until the planner has built (or failed to build) every plan asked of it so far.
  void WaitForPlanner();

 private:
  // A plan that several streams use, one execution at a time.
  struct SharedPlan {
    CufftPlan plan;
    int64_t batch = 0;
    absl::Mutex mu;
  };
  // One size's batched plans, batch 1 first, and the largest work area they take.
  struct SizePlans {
    std::vector<std::unique_ptr<SharedPlan>> by_batch;
    size_t work_bytes = 0;
  };
  using SizeKey = std::tuple<bool, int64_t>;          // (double, size)
  using BatchKey = std::tuple<bool, int64_t, int64_t>;  // (double, size, batch)

  FftPlans(int device, int64_t max_size, int max_exact_plans)
      : device_(device), max_size_(max_size), max_exact_plans_(max_exact_plans) {}
  absl::Status BuildBatchedPlans();
  SharedPlan* FindExact(const BatchKey& key);
  void AskPlanner(const BatchKey& key);
  void PlannerLoop();
  static absl::Status Execute(SharedPlan& p, bool f64, void* data, void* work, cudaStream_t stream);

  const int device_;
  const int64_t max_size_;
  const int max_exact_plans_;
  absl::flat_hash_map<SizeKey, SizePlans> sizes_;  // fixed once Create returns

  bool PlannerHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(exact_mu_) {
    return stopping_ || !queue_.empty();
  }
  bool PlannerIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(exact_mu_) {
    return stopping_ || (queue_.empty() && building_ == 0);
  }

  mutable absl::Mutex exact_mu_;
  absl::flat_hash_map<BatchKey, std::unique_ptr<SharedPlan>> exact_ ABSL_GUARDED_BY(exact_mu_);
  absl::flat_hash_set<BatchKey> asked_ ABSL_GUARDED_BY(exact_mu_);  // queued, built or failed
  std::deque<BatchKey> queue_ ABSL_GUARDED_BY(exact_mu_);
  int building_ ABSL_GUARDED_BY(exact_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(exact_mu_) = false;  // or the planner could not start
  std::thread planner_;

  std::atomic<int64_t> batched_executions_{0};
  std::atomic<int64_t> exact_executions_{0};
};

}  // namespace gpucompute
