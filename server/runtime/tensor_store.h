// Server-resident tensors: bytes kept in the server's host memory under an unguessable handle,
// owned by one client, counted against its quota and freed by DeleteTensor or after an idle
// expiry. Used as operation inputs in place (no copy) and as kept outputs.
//
// Memory: the backend's HostMemory while it has room (the CUDA backend's page-locked blocks, which
// a GPU reads by DMA where they are, without packing them into a staging buffer first), else
// plain host memory, 64-byte aligned. The page-locked share is bounded by --pinned_tensor_bytes,
// so that locked memory stays a fixed part of the host's whatever the clients' quotas.
//
// Lifetime: the store holds each tensor by shared_ptr and hands out shared_ptrs; a tensor
// deleted or expired while a job still reads it stays valid until that job drops it. Quotas
// count a tensor from its creation until it leaves the store (not until its bytes are freed).
//
// Threading: every method is thread-safe. Writes to an incomplete tensor may run concurrently
// (several PutTensor streams), each into its own range.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/element_type.h"
#include "server/runtime/host_memory.h"
#include "server/runtime/memory_budget.h"

namespace gpucompute {

struct TensorStoreOptions {
  int64_t max_bytes_per_client = int64_t{8} << 30;  // all of one client's resident tensors
  int max_tensors_per_client = 1024;
  // All clients' resident tensors together (client ids are whatever callers say they are, so
  // the per-client quota alone bounds nothing). Negative: half of MemoryLimitBytes() (the
  // host's memory, or the container's limit).
  int64_t max_total_bytes = -1;
  // A tensor neither used nor written for this long is freed (on the next sweep, and at once
  // when looked up). Zero or negative: never.
  absl::Duration idle_expiry = absl::Seconds(600);
  // How often a background thread frees expired tensors; zero: no thread (tests call Sweep()).
  absl::Duration sweep_interval = absl::Seconds(1);
  // The time source (tests inject a fake clock); default absl::Now.
  std::function<absl::Time()> clock;
  // Put before every handle: a worker of the worker-mode front marks its handles ("w3-") so
  // that the front sends calls naming them back to it.
  std::string handle_prefix;
  // The server's one memory budget (borrowed): every reserved tensor's bytes are taken from it
  // too, under its owner, and returned when the tensor leaves the store. Null: only the
  // store's own limits.
  MemoryBudget* server_memory = nullptr;
  // Where tensors' bytes are allocated while it has room (the backend's page-locked memory);
  // null, or no room: plain memory. Shared with the tensors, which give their blocks back.
  std::shared_ptr<HostMemory> host_memory;
};

// What a tensor is: its wire dtype (a gpucompute.v1.DType value, not interpreted here), the
// element size that dtype has, and its shape.
struct TensorSpec {
  int dtype = 0;
  int element_size = 0;
  std::vector<int64_t> shape;
  // The IEEE type of the elements when they are floating point: each write then notes whether
  // its values are all finite (ResidentTensor::values_finite), while its bytes are in cache.
  std::optional<ElementType> values;
};

// One resident tensor. Its bytes are written (Write) until complete, then never change.
class ResidentTensor {
 public:
  // `idle_expiry`: this tensor's own expiry when shorter than the store's (infinite: the
  // store's).
  ResidentTensor(std::string handle, std::string owner, TensorSpec spec, int64_t bytes,
                 absl::Time now, absl::Duration idle_expiry = absl::InfiniteDuration());
  ~ResidentTensor();
  ResidentTensor(const ResidentTensor&) = delete;
  ResidentTensor& operator=(const ResidentTensor&) = delete;

  const std::string& handle() const { return handle_; }
  const std::string& owner() const { return owner_; }
  const TensorSpec& spec() const { return spec_; }
  int64_t bytes() const { return bytes_; }

  // The bytes; only read them once complete() (or after a successful Acquire).
  absl::string_view data() const { return absl::string_view(data_, static_cast<size_t>(bytes_)); }

  // Copies `data` to [offset, offset + data.size()). INVALID_ARGUMENT outside the tensor,
  // FAILED_PRECONDITION once complete (resident tensors are immutable). The tensor becomes
  // complete when every byte has been written and no other write is still copying.
  absl::Status Write(int64_t offset, absl::string_view data);
  // The same for `pieces` written back to back from `offset` (a message's data as received).
  absl::Status Write(int64_t offset, absl::Span<const absl::string_view> pieces);

  bool complete() const;
  // Complete, and every write was of whole elements of a float type (spec().values) none of
  // which is NaN or infinite. False for adopted tensors (kept outputs): never checked.
  bool values_finite() const;
  int64_t received_bytes() const;  // distinct bytes written so far
  absl::Duration idle(absl::Time now) const;
  absl::Duration idle_expiry() const { return idle_expiry_; }

 private:
  friend class TensorStore;
  // Takes `bytes` (exactly bytes() long) as the complete contents, without a copy.
  void Adopt(std::string bytes);
  void Touch(absl::Time now);

  const std::string handle_;
  const std::string owner_;
  const TensorSpec spec_;
  const int64_t bytes_;
  const absl::Duration idle_expiry_;
  std::string adopted_;      // the storage when adopted (kept outputs)
  char* data_ = nullptr;     // adopted_.data(), block_.data or an aligned allocation of bytes_
  bool owns_allocation_ = false;
  std::shared_ptr<HostMemory> block_owner_;  // where block_ goes back to
  HostMemory::Block block_;

  mutable absl::Mutex mu_;
  std::map<int64_t, int64_t> received_ ABSL_GUARDED_BY(mu_);  // disjoint [begin, end) ranges
  int64_t received_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int writers_ ABSL_GUARDED_BY(mu_) = 0;
  bool complete_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_finite_ ABSL_GUARDED_BY(mu_) = true;  // every write so far checked and finite
  absl::Time last_use_ ABSL_GUARDED_BY(mu_);
};

// A tensor to add complete (an output kept on the server): spec and bytes.
struct NewTensor {
  TensorSpec spec;
  std::string bytes;  // product(shape) * element_size bytes, moved in
};

struct TensorStoreStats {
  int64_t tensors = 0;
  int64_t bytes = 0;
  int64_t clients = 0;
  int64_t expired = 0;  // since start
};

class TensorStore {
 public:
  explicit TensorStore(TensorStoreOptions options);
  ~TensorStore();  // stops the sweeper; tensors still held by jobs stay valid
  TensorStore(const TensorStore&) = delete;
  TensorStore& operator=(const TensorStore&) = delete;

  // Reserves an incomplete tensor for `owner` (its bytes come through Write). RESOURCE_EXHAUSTED
  // naming the limit (--tensor_quota_bytes, --tensor_quota_count) when it does not fit;
  // INVALID_ARGUMENT for a bad spec. A tensor of zero bytes is complete at once. With a finite
  // `idle_expiry` shorter than the store's, the tensor expires after that (the tensors that
  // carry one call's inputs: freed soon when the client that sent them dies).
  absl::StatusOr<std::shared_ptr<ResidentTensor>> Create(
      absl::string_view owner, TensorSpec spec,
      absl::Duration idle_expiry = absl::InfiniteDuration());

  // Adds complete tensors for `owner`, all or none (quota checked for their total), with
  // `idle_expiry` as in Create.
  absl::StatusOr<std::vector<std::shared_ptr<const ResidentTensor>>> AddComplete(
      absl::string_view owner, std::vector<NewTensor> tensors,
      absl::Duration idle_expiry = absl::InfiniteDuration());

  // RESOURCE_EXHAUSTED, as Create would answer, when a tensor of `bytes` would not fit
  // `owner`'s quota now; nothing is reserved. Operations check their kept outputs with it
  // before any work, so that an output too big is refused before it is allocated.
  absl::Status CheckRoom(absl::string_view owner, int64_t bytes);

  // `owner`'s tensor `handle`, for writing (PutTensor): NOT_FOUND unless it exists, belongs to
  // `owner` and has not expired. Counts as a use.
  absl::StatusOr<std::shared_ptr<ResidentTensor>> FindForWrite(absl::string_view owner,
                                                               absl::string_view handle);

  // `owner`'s complete tensor `handle`, for reading: NOT_FOUND as FindForWrite,
  // FAILED_PRECONDITION while incomplete. Counts as a use. The returned pointer keeps the
  // bytes alive after a delete or expiry.
  absl::StatusOr<std::shared_ptr<const ResidentTensor>> Acquire(absl::string_view owner,
                                                                absl::string_view handle);

  // Removes `owner`'s tensor `handle` (NOT_FOUND as above). Readers holding it keep it.
  absl::Status Delete(absl::string_view owner, absl::string_view handle);

  // `owner`'s tensors, sorted by handle.
  std::vector<std::shared_ptr<const ResidentTensor>> List(absl::string_view owner);
  int64_t OwnerBytes(absl::string_view owner);

  // Frees every tensor idle for longer than its expiry (the store's, or the tensor's own when
  // shorter; tensors in use by a job are not idle).
  // Returns how many were freed. Called by the sweeper thread; tests call it directly.
  int Sweep();

  // Drops every tensor (server shutdown). Readers holding one keep it.
  void Clear();

  TensorStoreStats Stats();
  const TensorStoreOptions& options() const { return options_; }
  absl::Time Now() const { return options_.clock(); }

 private:
  struct Usage {
    int64_t bytes = 0;
    int count = 0;
  };

  absl::Status CheckQuota(absl::string_view owner, int64_t bytes, int count) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `bytes` and `count` tensors against `owner`'s quota and the server's memory budget
  // (sweeping expired tensors first when they would not fit), or RESOURCE_EXHAUSTED naming
  // the limit.
  absl::Status Reserve(absl::string_view owner, int64_t bytes, int count) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TryReserve(absl::string_view owner, int64_t bytes, int count) ABSL_LOCKS_EXCLUDED(mu_);
  void Unreserve(absl::string_view owner, int64_t bytes, int count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry if it exists for `owner` and is not expired; an expired one is removed and
  // handed back in `expired` (to be freed after the lock is released).
  std::shared_ptr<ResidentTensor> FindLocked(absl::string_view owner, absl::string_view handle,
                                             absl::Time now,
                                             std::shared_ptr<ResidentTensor>* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Expired(const std::shared_ptr<ResidentTensor>& t, absl::Time now) const;
  // Removes `handle` from the store and its quota; returns it so that the caller frees it
  // after releasing the lock.
  std::shared_ptr<ResidentTensor> RemoveLocked(const std::string& handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewHandle() const;
  void SweepLoop();

  const TensorStoreOptions options_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ResidentTensor>> tensors_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the sum of usage_'s bytes
  int64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

// Product of `shape` times `element_size`, or INVALID_ARGUMENT for a negative dimension or an
// overflow.
absl::StatusOr<int64_t> TensorBytes(const TensorSpec& spec);

}  // namespace gpucompute
