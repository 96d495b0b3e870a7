// The server's host-memory budget (see memory_budget.h).
#include "server/runtime/memory_budget.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute {

MemoryLease::MemoryLease(MemoryLease&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryLease& MemoryLease::operator=(MemoryLease&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryLease::~MemoryLease() { Release(); }

void MemoryLease::Release() {
  if (budget_ != nullptr) budget_->Give(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(int64_t limit_bytes, std::string flag)
    : limit_(limit_bytes), flag_(std::move(flag)) {}

absl::StatusOr<MemoryLease> MemoryBudget::Acquire(int64_t bytes, absl::string_view what) {
  if (bytes < 0) return absl::InternalError(absl::StrCat(what, ": a lease of ", bytes, " bytes"));
  absl::MutexLock lock(&mu_);
  if (bytes > limit_ - in_use_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " would hold ", bytes, " bytes of host memory while ", in_use_,
        " are held by the work in progress; the server's limit is ", limit_, " bytes (", flag_,
        ")"));
  }
  in_use_ += bytes;
  return MemoryLease(this, bytes);
}

int64_t MemoryBudget::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

void MemoryBudget::Give(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  in_use_ -= bytes;
}

}  // namespace gpucompute
