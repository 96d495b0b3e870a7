// Server-resident tensors (see tensor_store.h).
#include "server/runtime/tensor_store.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/byte_range.h"
#include "common/memory_limit.h"
#include "common/non_finite.h"
#include "common/parallel_copy.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

constexpr std::align_val_t kAlignment{64};

}  // namespace

absl::StatusOr<int64_t> TensorBytes(const TensorSpec& spec) {
  if (spec.element_size <= 0) return absl::InvalidArgumentError("dtype: must be set to a known dtype");
  int64_t count = 1;
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    const int64_t d = spec.shape[i];
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape[", i, "]: must be >= 0 (got ", d, ")"));
    }
    if (d > 0 && count > std::numeric_limits<int64_t>::max() / d / spec.element_size) {
      return absl::InvalidArgumentError("shape: too many elements");
    }
    count *= d;
  }
  return count * spec.element_size;
}

// ---------------------------------------------------------------- ResidentTensor

ResidentTensor::ResidentTensor(std::string handle, std::string owner, TensorSpec spec,
                               int64_t bytes, absl::Time now, absl::Duration idle_expiry)
    : handle_(std::move(handle)),
      owner_(std::move(owner)),
      spec_(std::move(spec)),
      bytes_(bytes),
      idle_expiry_(idle_expiry) {
  last_use_ = now;
  complete_ = bytes_ == 0;
}

ResidentTensor::~ResidentTensor() {
  if (block_owner_ != nullptr) {
    block_owner_->Free(block_);
  } else if (owns_allocation_) {
    ::operator delete(data_, kAlignment);
  }
}

void ResidentTensor::Adopt(std::string bytes) {
  adopted_ = std::move(bytes);
  data_ = adopted_.data();
  absl::MutexLock lock(&mu_);
  received_bytes_ = bytes_;
  complete_ = true;
  writes_finite_ = false;
}

absl::Status ResidentTensor::Write(int64_t offset, absl::string_view data) {
  return Write(offset, absl::MakeConstSpan(&data, 1));
}

absl::Status ResidentTensor::Write(int64_t offset, absl::Span<const absl::string_view> pieces) {
  int64_t n = 0;
  for (absl::string_view p : pieces) n += static_cast<int64_t>(p.size());
  if (offset < 0 || offset > bytes_ || n > bytes_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("offset: bytes ", ByteRange(offset, n),
                                                   " are outside the tensor's ", bytes_, " bytes"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (complete_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tensor \"", handle_, "\" is complete; resident tensors cannot be changed"));
    }
    if (n == 0) return absl::OkStatus();
    ++writers_;
  }
  // Outside the lock: writers of different ranges copy at once (parallel PutTensor streams).
  int64_t at = offset;
  for (absl::string_view p : pieces) {
    ParallelCopy(data_ + at, p.data(), static_cast<int64_t>(p.size()));
    at += static_cast<int64_t>(p.size());
  }
  // The values just written, while they are in cache: a later operation reading the tensor
  // then skips its own pass over them (216 MB took ~10 ms on 16 threads).
  const int64_t element = spec_.element_size;
  const bool finite = spec_.values.has_value() && element > 0 && offset % element == 0 &&
                      n % element == 0 &&
                      FirstNonFinite(*spec_.values, absl::string_view(data_ + offset, n)) < 0;
  absl::MutexLock lock(&mu_);
  --writers_;
  // A write over bytes already written (or being written by another stream) may leave a mix
  // that neither check saw: then the values are no longer known to be finite.
  auto next = received_.upper_bound(offset);
  const bool overwrites = (next != received_.end() && next->first < offset + n) ||
                          (next != received_.begin() && std::prev(next)->second > offset);
  writes_finite_ = writes_finite_ && finite && !overwrites;
  int64_t begin = offset, end = offset + n;
  auto it = received_.upper_bound(begin);
  if (it != received_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) {
      begin = prev->first;
      end = std::max(end, prev->second);
      received_bytes_ -= prev->second - prev->first;
      it = received_.erase(prev);
    }
  }
  while (it != received_.end() && it->first <= end) {
    end = std::max(end, it->second);
    received_bytes_ -= it->second - it->first;
    it = received_.erase(it);
  }
  received_[begin] = end;
  received_bytes_ += end - begin;
  // Complete only once no other writer is still copying into the bytes.
  if (received_bytes_ == bytes_ && writers_ == 0) {
    complete_ = true;
    received_.clear();
  }
  return absl::OkStatus();
}

bool ResidentTensor::complete() const {
  absl::MutexLock lock(&mu_);
  return complete_;
}

bool ResidentTensor::values_finite() const {
  absl::MutexLock lock(&mu_);
  return complete_ && writes_finite_;
}

int64_t ResidentTensor::received_bytes() const {
  absl::MutexLock lock(&mu_);
  return received_bytes_;
}

absl::Duration ResidentTensor::idle(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return now - last_use_;
}

void ResidentTensor::Touch(absl::Time now) {
  absl::MutexLock lock(&mu_);
  last_use_ = std::max(last_use_, now);
}

// ---------------------------------------------------------------- TensorStore

namespace {

TensorStoreOptions WithDefaults(TensorStoreOptions o) {
  if (!o.clock) o.clock = [] { return absl::Now(); };
  if (o.max_total_bytes < 0) {
    o.max_total_bytes = MemoryLimitBytes() / 2;
  }
  return o;
}

}  // namespace

TensorStore::TensorStore(TensorStoreOptions options) : options_(WithDefaults(std::move(options))) {
  // Runs even when the store's expiry is off: tensors may carry expiries of their own.
  if (options_.sweep_interval > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] { SweepLoop(); });
  }
}

TensorStore::~TensorStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
}

void TensorStore::SweepLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), options_.sweep_interval);
      if (stopping_) return;
    }
    if (const int n = Sweep(); n > 0) spdlog::debug("tensor store: {} idle tensors expired", n);
  }
}

std::string TensorStore::NewHandle() const {
  // 128 random bits from the kernel's CSPRNG: handles cannot be guessed from one another.
  unsigned char bits[16];
  size_t got = 0;
  while (got < sizeof(bits)) {
    const ssize_t n = getrandom(bits + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      spdlog::critical("getrandom failed: {}", std::strerror(errno));
      std::abort();
    }
  }
  return absl::StrCat(options_.handle_prefix,
                      absl::BytesToHexString(
                          absl::string_view(reinterpret_cast<const char*>(bits), sizeof(bits))));
}

absl::Status TensorStore::CheckQuota(absl::string_view owner, int64_t bytes, int count) const {
  Usage u;
  if (auto it = usage_.find(owner); it != usage_.end()) u = it->second;
  if (count > 0 && u.count + count > options_.max_tensors_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client \"", owner, "\" has ", u.count, " resident tensors; the limit is ",
        options_.max_tensors_per_client, " per client (--tensor_quota_count)"));
  }
  if (bytes > options_.max_bytes_per_client - u.bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client \"", owner, "\" has ", u.bytes, " bytes of resident tensors and asks for ", bytes,
        " more; the limit is ", options_.max_bytes_per_client,
        " bytes per client (--tensor_quota_bytes)"));
  }
  if (bytes > options_.max_total_bytes - total_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", total_bytes_, " bytes of resident tensors for all clients and client \"",
        owner, "\" asks for ", bytes, " more; the limit is ", options_.max_total_bytes,
        " bytes in all (--tensor_store_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status TensorStore::CheckRoom(absl::string_view owner, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  return CheckQuota(owner, bytes, 1);
}

absl::Status TensorStore::Reserve(absl::string_view owner, int64_t bytes, int count) {
  if (TryReserve(owner, bytes, count).ok()) return absl::OkStatus();
  Sweep();  // expired tensors must not hold the quota
  return TryReserve(owner, bytes, count);
}

absl::Status TensorStore::TryReserve(absl::string_view owner, int64_t bytes, int count) {
  absl::MutexLock lock(&mu_);
  if (absl::Status quota = CheckQuota(owner, bytes, count); !quota.ok()) return quota;
  if (options_.server_memory != nullptr) {
    const std::string what = absl::StrCat("resident tensors of client \"", owner, "\"");
    if (absl::Status s = options_.server_memory->Take(bytes, what, owner); !s.ok()) return s;
  }
  Usage& u = usage_[owner];
  u.bytes += bytes;
  u.count += count;
  total_bytes_ += bytes;
  return absl::OkStatus();
}

void TensorStore::Unreserve(absl::string_view owner, int64_t bytes, int count) {
  auto it = usage_.find(owner);
  if (it == usage_.end()) return;
  if (options_.server_memory != nullptr) options_.server_memory->Return(bytes, owner);
  it->second.bytes -= bytes;
  it->second.count -= count;
  total_bytes_ -= bytes;
  if (it->second.count <= 0) usage_.erase(it);
}

absl::StatusOr<std::shared_ptr<ResidentTensor>> TensorStore::Create(absl::string_view owner,
                                                                    TensorSpec spec,
                                                                    absl::Duration idle_expiry) {
  auto bytes = TensorBytes(spec);
  if (!bytes.ok()) return bytes.status();
  // Reserved before allocating (outside the lock) so that concurrent creates see it.
  if (absl::Status s = Reserve(owner, *bytes, 1); !s.ok()) return s;
  auto tensor = std::make_shared<ResidentTensor>(NewHandle(), std::string(owner), std::move(spec),
                                                 *bytes, Now(), idle_expiry);
  if (options_.host_memory != nullptr) {
    tensor->block_ = options_.host_memory->Allocate(static_cast<size_t>(*bytes));
    if (tensor->block_.data != nullptr) {
      tensor->block_owner_ = options_.host_memory;
      tensor->data_ = static_cast<char*>(tensor->block_.data);
    }
  }
  if (*bytes > 0 && tensor->data_ == nullptr) {
    tensor->data_ = static_cast<char*>(
        ::operator new(static_cast<size_t>(*bytes), kAlignment, std::nothrow));
    if (tensor->data_ == nullptr) {
      absl::MutexLock lock(&mu_);
      Unreserve(owner, *bytes, 1);
      return absl::ResourceExhaustedError(
          absl::StrCat("the server could not allocate ", *bytes, " bytes of host memory"));
    }
    tensor->owns_allocation_ = true;
  }
  absl::MutexLock lock(&mu_);
  tensors_.emplace(tensor->handle(), tensor);
  return tensor;
}

absl::StatusOr<std::vector<std::shared_ptr<const ResidentTensor>>> TensorStore::AddComplete(
    absl::string_view owner, std::vector<NewTensor> tensors, absl::Duration idle_expiry) {
  int64_t total = 0;
  for (const NewTensor& t : tensors) {
    auto bytes = TensorBytes(t.spec);
    if (!bytes.ok()) return bytes.status();
    if (*bytes != static_cast<int64_t>(t.bytes.size())) {
      return absl::InternalError(absl::StrCat("a kept tensor has ", t.bytes.size(),
                                              " bytes but its shape needs ", *bytes));
    }
    total += *bytes;
  }
  if (absl::Status s = Reserve(owner, total, static_cast<int>(tensors.size())); !s.ok()) return s;
  const absl::Time now = Now();
  std::vector<std::shared_ptr<const ResidentTensor>> out;
  out.reserve(tensors.size());
  absl::MutexLock lock(&mu_);
  for (NewTensor& t : tensors) {
    const int64_t bytes = static_cast<int64_t>(t.bytes.size());
    auto tensor = std::make_shared<ResidentTensor>(NewHandle(), std::string(owner),
                                                   std::move(t.spec), bytes, now, idle_expiry);
    tensor->Adopt(std::move(t.bytes));
    tensors_.emplace(tensor->handle(), tensor);
    out.push_back(std::move(tensor));
  }
  return out;
}

bool TensorStore::Expired(const std::shared_ptr<ResidentTensor>& t, absl::Time now) const {
  absl::Duration expiry = t->idle_expiry();
  if (options_.idle_expiry > absl::ZeroDuration()) expiry = std::min(expiry, options_.idle_expiry);
  if (expiry == absl::InfiniteDuration()) return false;
  // Held elsewhere (a job reading it, a PutTensor stream writing it): in use, not idle.
  if (t.use_count() > 1) return false;
  return t->idle(now) > expiry;
}

std::shared_ptr<ResidentTensor> TensorStore::RemoveLocked(const std::string& handle) {
  auto it = tensors_.find(handle);
  if (it == tensors_.end()) return nullptr;
  std::shared_ptr<ResidentTensor> removed = std::move(it->second);
  tensors_.erase(it);
  Unreserve(removed->owner(), removed->bytes(), 1);
  return removed;
}

std::shared_ptr<ResidentTensor> TensorStore::FindLocked(
    absl::string_view owner, absl::string_view handle, absl::Time now,
    std::shared_ptr<ResidentTensor>* expired) {
  auto it = tensors_.find(handle);
  // Another client's tensor is reported exactly like a missing one.
  if (it == tensors_.end() || it->second->owner() != owner) return nullptr;
  if (Expired(it->second, now)) {
    ++expired_;
    *expired = RemoveLocked(it->second->handle());
    return nullptr;
  }
  return it->second;
}

namespace {

absl::Status NoTensor(absl::string_view handle) {
  return absl::NotFoundError(absl::StrCat("no resident tensor \"", handle, "\""));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ResidentTensor>> TensorStore::FindForWrite(
    absl::string_view owner, absl::string_view handle) {
  const absl::Time now = Now();
  std::shared_ptr<ResidentTensor> expired;  // freed after the lock is released
  absl::MutexLock lock(&mu_);
  std::shared_ptr<ResidentTensor> t = FindLocked(owner, handle, now, &expired);
  if (t == nullptr) return NoTensor(handle);
  t->Touch(now);
  return t;
}

absl::StatusOr<std::shared_ptr<const ResidentTensor>> TensorStore::Acquire(
    absl::string_view owner, absl::string_view handle) {
  const absl::Time now = Now();
  std::shared_ptr<ResidentTensor> expired;  // freed after the lock is released
  absl::MutexLock lock(&mu_);
  std::shared_ptr<ResidentTensor> t = FindLocked(owner, handle, now, &expired);
  if (t == nullptr) return NoTensor(handle);
  if (!t->complete()) {
    return absl::FailedPreconditionError(
        absl::StrCat("resident tensor \"", handle, "\" is incomplete (", t->received_bytes(),
                     " of ", t->bytes(), " bytes received)"));
  }
  t->Touch(now);
  return std::shared_ptr<const ResidentTensor>(std::move(t));
}

absl::Status TensorStore::Delete(absl::string_view owner, absl::string_view handle) {
  std::shared_ptr<ResidentTensor> removed;  // freed after the lock is released
  absl::MutexLock lock(&mu_);
  auto it = tensors_.find(handle);
  if (it == tensors_.end() || it->second->owner() != owner) return NoTensor(handle);
  removed = RemoveLocked(it->second->handle());
  return absl::OkStatus();
}

std::vector<std::shared_ptr<const ResidentTensor>> TensorStore::List(absl::string_view owner) {
  Sweep();
  std::vector<std::shared_ptr<const ResidentTensor>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, t] : tensors_) {
      if (t->owner() == owner) out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->handle() < b->handle(); });
  return out;
}

int64_t TensorStore::OwnerBytes(absl::string_view owner) {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(owner);
  return it == usage_.end() ? 0 : it->second.bytes;
}

int TensorStore::Sweep() {
  const absl::Time now = Now();
  // Freed after the lock is released: dropping a large tensor unmaps memory.
  std::vector<std::shared_ptr<ResidentTensor>> freed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> handles;
    for (const auto& [handle, t] : tensors_) {
      if (Expired(t, now)) handles.push_back(handle);
    }
    for (const std::string& h : handles) freed.push_back(RemoveLocked(h));
    expired_ += static_cast<int64_t>(handles.size());
  }
  return static_cast<int>(freed.size());
}

void TensorStore::Clear() {
  absl::flat_hash_map<std::string, std::shared_ptr<ResidentTensor>> dropped;
  absl::MutexLock lock(&mu_);
  dropped.swap(tensors_);
  if (options_.server_memory != nullptr) {
    for (const auto& [owner, u] : usage_) options_.server_memory->Return(u.bytes, owner);
  }
  usage_.clear();
  total_bytes_ = 0;
}

TensorStoreStats TensorStore::Stats() {
  absl::MutexLock lock(&mu_);
  TensorStoreStats s;
  s.tensors = static_cast<int64_t>(tensors_.size());
  for (const auto& [owner, u] : usage_) s.bytes += u.bytes;
  s.clients = static_cast<int64_t>(usage_.size());
  s.expired = expired_;
  return s;
}

}  // namespace gpucompute
