// POSIX shared-memory regions registered by clients on the same node (Triton's "system shared
// memory"): the client creates an object (shm_open), registers a region of it under a name,
// and tensors then name (region, offset, length) instead of carrying bytes. The server maps the
// region read-write once, at registration; inputs are copied out of it and outputs into it.
//
// Off unless the server runs with --allow_shared_memory. A caller registers only objects it can
// write itself (shared_memory_proof.h): it writes the bytes of a proof the server gave it at the
// start of the region, and the server finds them there. So a peer cannot make the server map
// another process's memory, whatever privileges the server has. A client may shrink (ftruncate) a
// registered object while the server uses it: each use re-checks the object's size, and the
// copies that touch the region (common/guarded_copy.h) turn the bus error of a read or
// write past the object's end into an error for that call, so the server does not crash.
//
// Names are per client (the same caller id that owns resident tensors). A region unregistered
// while a job still uses it stays mapped until that job drops it (shared_ptr). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/runtime/shared_memory_proof.h"

namespace gpucompute {

// One mapped region [offset, offset + size) of a POSIX shared-memory object.
class SharedMemoryRegion {
 public:
  // Opens `key` read-write and maps the region. With a `prefix`, the object's bytes at `offset`
  // must be it (read before anything is mapped or the object's size is told; else
  // PERMISSION_DENIED). INVALID_ARGUMENT for a malformed key or a region outside the object,
  // NOT_FOUND when no such object exists, PERMISSION_DENIED when the server may not open it.
  static absl::StatusOr<std::shared_ptr<SharedMemoryRegion>> Map(std::string name, std::string key,
                                                                 int64_t offset, int64_t size,
                                                                 absl::string_view prefix = {});
  ~SharedMemoryRegion();  // unmaps and closes
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  int64_t offset() const { return offset_; }  // within the object
  int64_t size() const { return size_; }
  char* data() const { return data_; }

  // OK while the object still covers the region (a client may have shrunk it since).
  absl::Status CheckStillMapped() const;

 private:
  SharedMemoryRegion() = default;

  std::string name_;
  std::string key_;
  int64_t offset_ = 0;
  int64_t size_ = 0;
  int fd_ = -1;
  void* mapping_ = nullptr;  // page-aligned start of the mapping
  size_t mapping_bytes_ = 0;
  char* data_ = nullptr;     // mapping_ + (offset_ - its page-aligned part)
};

struct SharedMemoryStats {
  int64_t regions = 0;
  int64_t bytes = 0;  // mapped
};

// The objects a caller may register: those named as the clients name what they create. The
// server opens an object with its own privileges, so this keeps a caller from naming any other
// object on the node (another process's semaphore "/sem.X", an object of another user).
inline constexpr char kSharedMemoryKeyPrefix[] = "/gpucompute-";

class SharedMemoryRegistry {
 public:
  static constexpr int kMaxRegionsPerClient = 256;
  // All callers' regions together (each holds a descriptor and a mapping; callers name
  // themselves, so the per-client limit alone bounds nothing).
  static constexpr int kDefaultMaxRegions = 1024;

  // `proof_secret`: SharedMemoryProofs' (empty: a random one of this registry's own).
  explicit SharedMemoryRegistry(bool enabled, std::string proof_secret = "",
                                int max_regions = kDefaultMaxRegions)
      : enabled_(enabled), proofs_(std::move(proof_secret)), max_regions_(max_regions) {}
  ~SharedMemoryRegistry() { Clear(); }

  bool enabled() const { return enabled_; }

  // A proof for `owner` to register bytes from `offset` of `key` (SharedMemoryProofs::Issue).
  // FAILED_PRECONDITION when off; INVALID_ARGUMENT for a key Register would refuse or a
  // negative offset.
  absl::StatusOr<std::string> IssueProof(absl::string_view owner, absl::string_view key,
                                         int64_t offset) const;

  // Maps `key`'s bytes [offset, offset + byte_size) as `owner`'s region `name` (1-128 characters
  // of [A-Za-z0-9_.-]) once `proof`, issued to `owner` for this key and offset, checks and is
  // found at the start of the region. FAILED_PRECONDITION when shared memory is off (naming the
  // flag), ALREADY_EXISTS for a name `owner` has registered, RESOURCE_EXHAUSTED beyond
  // kMaxRegionsPerClient, the server's `max_regions` (--max_shared_memory_regions) or an eighth of
  // the open-descriptor limit (each region holds a descriptor), INVALID_ARGUMENT for a key that does not start with
  // kSharedMemoryKeyPrefix or a region smaller than a proof, PERMISSION_DENIED for a proof that
  // does not check or is not in the region (the object is then unmapped at once), else as
  // SharedMemoryRegion::Map.
  absl::Status Register(absl::string_view owner, absl::string_view name, absl::string_view key,
                        int64_t offset, int64_t byte_size, absl::string_view proof);

  // Removes `owner`'s region `name`, or every region of `owner` when `name` is empty.
  // NOT_FOUND for an unknown name.
  absl::Status Unregister(absl::string_view owner, absl::string_view name);

  // `owner`'s region `name`: FAILED_PRECONDITION when off, NOT_FOUND when not registered. The
  // region stays mapped while the returned pointer lives.
  absl::StatusOr<std::shared_ptr<SharedMemoryRegion>> Find(absl::string_view owner,
                                                           absl::string_view name) const;

  // `owner`'s regions, sorted by name.
  std::vector<std::shared_ptr<SharedMemoryRegion>> List(absl::string_view owner) const;

  // Unregisters everything (server shutdown).
  void Clear();

  SharedMemoryStats Stats() const;

 private:
  absl::Status CheckKey(absl::string_view key) const;
  // RESOURCE_EXHAUSTED when `owner` or the server holds as many regions as allowed.
  absl::Status CheckRoomLocked(absl::string_view owner) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool enabled_;
  const SharedMemoryProofs proofs_;
  const int max_regions_;
  mutable absl::Mutex mu_;
  int regions_held_ ABSL_GUARDED_BY(mu_) = 0;
  // owner -> name -> region
  absl::flat_hash_map<std::string,
                      absl::flat_hash_map<std::string, std::shared_ptr<SharedMemoryRegion>>>
      regions_ ABSL_GUARDED_BY(mu_);
};

// The error every shared-memory use gets while the feature is off.
absl::Status SharedMemoryDisabledError();

// INVALID_ARGUMENT unless `name` is 1-128 characters of [A-Za-z0-9_.-].
absl::Status CheckRegionName(absl::string_view name);

}  // namespace gpucompute
