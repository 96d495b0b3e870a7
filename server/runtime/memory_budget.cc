// The server's host-memory budget (see memory_budget.h).
#include "server/runtime/memory_budget.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute {

MemoryLease::MemoryLease(MemoryLease&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      caller_(std::move(other.caller_)) {}

MemoryLease& MemoryLease::operator=(MemoryLease&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    caller_ = std::move(other.caller_);
  }
  return *this;
}

MemoryLease::~MemoryLease() { Release(); }

void MemoryLease::Release() {
  if (budget_ != nullptr) budget_->Return(bytes_, caller_);
  budget_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(int64_t limit_bytes, std::string flag, double caller_share,
                           std::string share_flag, MemoryBudget* parent)
    : parent_(parent),
      limit_(limit_bytes),
      flag_(std::move(flag)),
      caller_limit_(static_cast<int64_t>(static_cast<double>(limit_bytes) *
                                         std::clamp(caller_share, 0.0, 1.0))),
      share_flag_(std::move(share_flag)) {}

absl::StatusOr<MemoryLease> MemoryBudget::Acquire(int64_t bytes, absl::string_view what,
                                                  absl::string_view caller) {
  if (absl::Status s = Take(bytes, what, caller); !s.ok()) return s;
  return MemoryLease(this, bytes, std::string(caller));
}

absl::Status MemoryBudget::Take(int64_t bytes, absl::string_view what, absl::string_view caller) {
  if (bytes < 0) return absl::InternalError(absl::StrCat(what, ": a lease of ", bytes, " bytes"));
  if (parent_ != nullptr) {
    if (absl::Status s = parent_->Take(bytes, what, caller); !s.ok()) return s;
  }
  absl::Status here = TakeHere(bytes, what, caller);
  if (!here.ok() && parent_ != nullptr) parent_->Return(bytes, caller);
  return here;
}

void MemoryBudget::Return(int64_t bytes, absl::string_view caller) {
  ReturnHere(bytes, caller);
  if (parent_ != nullptr) parent_->Return(bytes, caller);
}

absl::Status MemoryBudget::TakeHere(int64_t bytes, absl::string_view what,
                                    absl::string_view caller) {
  absl::MutexLock lock(&mu_);
  if (bytes > limit_ - in_use_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " would hold ", bytes, " bytes of host memory while ", in_use_,
        " are held; the server's limit is ", limit_, " bytes (", flag_, ")"));
  }
  auto mine = by_caller_.find(caller);
  const int64_t held = mine == by_caller_.end() ? 0 : mine->second;
  if (bytes > caller_limit_ - held) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " would hold ", bytes, " bytes of host memory while this caller holds ", held,
        "; one caller may hold ", caller_limit_, " bytes (", share_flag_, " of ", flag_, ")"));
  }
  in_use_ += bytes;
  if (bytes > 0) by_caller_[std::string(caller)] += bytes;
  return absl::OkStatus();
}

int64_t MemoryBudget::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

int64_t MemoryBudget::in_use(absl::string_view caller) const {
  absl::MutexLock lock(&mu_);
  auto it = by_caller_.find(caller);
  return it == by_caller_.end() ? 0 : it->second;
}

void MemoryBudget::ReturnHere(int64_t bytes, absl::string_view caller) {
  absl::MutexLock lock(&mu_);
  in_use_ -= bytes;
  if (bytes == 0) return;
  auto it = by_caller_.find(caller);
  if (it != by_caller_.end() && (it->second -= bytes) <= 0) by_caller_.erase(it);
}

}  // namespace gpucompute
