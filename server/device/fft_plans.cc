// A stream slot's cuFFT plans (see fft_plans.h).
#include "server/device/fft_plans.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/element_type.h"
#include "common/status_macros.h"
#include "math/fft_sizes.h"
#include "server/device/cuda_resources.h"
#include "server/device/stream_buffers.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

constexpr int64_t kBatchStep = 16;  // the batched plans' batches: 1, 16, 256, ...

cufftType TypeOf(bool f64) { return f64 ? CUFFT_Z2Z : CUFFT_C2C; }
size_t ComplexBytes(bool f64) { return f64 ? 16 : 8; }
const char* TypeName(bool f64) { return ElementName(f64 ? ElementType::kFloat64 : ElementType::kFloat32); }

}  // namespace

absl::StatusOr<std::unique_ptr<FftPlans>> FftPlans::Create(int device, int64_t max_size,
                                                            int max_exact_plans) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::unique_ptr<FftPlans> plans(new FftPlans(device, max_size, max_exact_plans));
  RETURN_IF_ERROR(plans->BuildBatchedPlans());
  plans->planner_ = std::thread([p = plans.get()] { p->PlannerLoop(); });
  return plans;
}

absl::Status FftPlans::BuildBatchedPlans() {
  for (bool f64 : {false, true}) {
    for (int64_t size : FftSizesBetween(2, max_size_)) {
      SizePlans& s = sizes_[SizeKey{f64, size}];
      for (int64_t batch = 1; batch == 1 || batch * size <= kLevelPoints; batch *= kBatchStep) {
        absl::StatusOr<CufftPlan> plan = CufftPlan::Create1d(size, batch, TypeOf(f64));
        if (!plan.ok()) {
          return absl::Status(plan.status().code(),
                              absl::StrCat("cuFFT plan for ", batch, " x ", size, " ", TypeName(f64),
                                           " points: ", plan.status().message()));
        }
        s.work_bytes = std::max(s.work_bytes, plan->work_bytes());
        s.by_batch.push_back(Plan{*std::move(plan), batch});
      }
    }
  }
  return absl::OkStatus();
}

FftPlans::~FftPlans() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (planner_.joinable()) planner_.join();
}

FftPlans::Counts FftPlans::counts() const {
  Counts c;
  for (const auto& [key, s] : sizes_) c.batched_plans += static_cast<int64_t>(s.by_batch.size());
  {
    absl::MutexLock lock(&mu_);
    c.exact_plans = static_cast<int64_t>(exact_.size());
  }
  c.batched_executions = batched_executions_.load(std::memory_order_relaxed);
  c.exact_executions = exact_executions_.load(std::memory_order_relaxed);
  return c;
}

absl::Status FftPlans::Execute(const Plan& p, bool f64, void* data, void* work, cudaStream_t stream) {
  CUFFT_RETURN_IF_ERROR(cufftSetStream(p.plan.get(), stream));
  CUFFT_RETURN_IF_ERROR(cufftSetWorkArea(p.plan.get(), work));
  if (f64) {
    auto* cells = static_cast<cufftDoubleComplex*>(data);
    CUFFT_RETURN_IF_ERROR(cufftExecZ2Z(p.plan.get(), cells, cells, CUFFT_INVERSE));
  } else {
    auto* cells = static_cast<cufftComplex*>(data);
    CUFFT_RETURN_IF_ERROR(cufftExecC2C(p.plan.get(), cells, cells, CUFFT_INVERSE));
  }
  return absl::OkStatus();
}

absl::Status FftPlans::Inverse(ElementType dtype, int64_t size, int64_t batch, void* data,
                               cudaStream_t stream, cudaMemPool_t pool) {
  if (batch <= 0) return absl::OkStatus();
  const bool f64 = dtype == ElementType::kFloat64;
  StreamScratch work(pool, stream);
  if (const Plan* exact = FindExact(BatchKey{f64, size, batch})) {
    ASSIGN_OR_RETURN(void* area, work.Get(exact->plan.work_bytes()));
    RETURN_IF_ERROR(Execute(*exact, f64, data, area, stream));
    exact_executions_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  const auto found = sizes_.find(SizeKey{f64, size});
  if (found == sizes_.end()) {
    return absl::InternalError(absl::StrCat("no cuFFT plan for ", size, "-point transforms: the "
                                            "slot's plans cover the even sizes of "
                                            "math/fft_sizes.h up to ",
                                            max_size_));
  }
  const SizePlans& s = found->second;
  ASSIGN_OR_RETURN(void* area, work.Get(s.work_bytes));  // one area, the executions in turn
  char* at = static_cast<char*>(data);
  int64_t left = batch, executions = 0;
  for (auto p = s.by_batch.rbegin(); p != s.by_batch.rend(); ++p) {
    for (; left >= p->batch; left -= p->batch, ++executions) {
      RETURN_IF_ERROR(Execute(*p, f64, at, area, stream));
      at += static_cast<size_t>(p->batch * size) * ComplexBytes(f64);
    }
  }
  if (executions > 1) AskPlanner(BatchKey{f64, size, batch});
  batched_executions_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

const FftPlans::Plan* FftPlans::FindExact(const BatchKey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  const auto it = exact_.find(key);
  return it == exact_.end() ? nullptr : it->second.get();  // never erased: stable
}

void FftPlans::AskPlanner(const BatchKey& key) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || asked_.contains(key)) return;
  if (asked_.size() >= static_cast<size_t>(std::max(max_exact_plans_, 0))) {
    if (max_exact_plans_ > 0 && !cap_logged_) {
      spdlog::warn("device {}: {} exact cuFFT plans on a stream slot, the most it makes: further "
                   "(size, batch) pairs run on the batched plans", device_, max_exact_plans_);
      cap_logged_ = true;
    }
    return;
  }
  asked_.insert(key);
  queue_.push_back(key);
}

void FftPlans::PlannerLoop() {
  if (const cudaError_t err = cudaSetDevice(device_); err != cudaSuccess) {
    spdlog::warn("device {}: the cuFFT planner cannot use the device ({}); every batch runs on "
                 "the batched plans", device_, cudaGetErrorName(err));
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    return;
  }
  while (true) {
    BatchKey key;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &FftPlans::PlannerHasWork));
      if (stopping_) return;
      key = queue_.front();
      queue_.pop_front();
      ++building_;
    }
    BuildExact(key);
  }
}

void FftPlans::BuildExact(const BatchKey& key) {
  const auto [f64, size, batch] = key;
  absl::StatusOr<CufftPlan> plan = CufftPlan::Create1d(size, batch, TypeOf(f64));
  if (!plan.ok()) {  // stays asked: its batches keep running on the batched plans
    spdlog::warn("device {}: no cuFFT plan for {} x {} {} points: {}", device_, batch, size,
                 TypeName(f64), plan.status().ToString());
  }
  absl::MutexLock lock(&mu_);
  --building_;
  if (plan.ok()) exact_.emplace(key, std::make_unique<Plan>(Plan{*std::move(plan), batch}));
}

void FftPlans::WaitForPlanner() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &FftPlans::PlannerIdle));
}

}  // namespace gpucompute
