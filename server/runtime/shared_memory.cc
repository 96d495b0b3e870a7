// Shared-memory regions (see shared_memory.h).
#include "server/runtime/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/byte_range.h"
#include "common/descriptor_limit.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

absl::Status CheckKey(absl::string_view key) {
  // As shm_open(3) wants it to be portable: "/" then 1..NAME_MAX characters, no other "/".
  if (key.size() < 2 || key[0] != '/' || key.size() > NAME_MAX + 1 ||
      key.find('/', 1) != absl::string_view::npos || key.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key \"", key, "\": must be \"/\" followed by 1 to ", NAME_MAX,
        " characters other than \"/\" (the name given to shm_open)"));
  }
  return absl::OkStatus();
}

absl::Status OpenError(absl::string_view key, int err) {
  const std::string what = absl::StrCat("key \"", key, "\": shm_open: ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(absl::StrCat(what, " (create the object first)"));
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(what);
    default: return absl::InvalidArgumentError(what);
  }
}

}  // namespace

absl::Status SharedMemoryDisabledError() {
  return absl::FailedPreconditionError(
      "shared memory is disabled on this server (start it with --allow_shared_memory)");
}

absl::Status CheckRegionName(absl::string_view name) {
  const bool chars_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
  if (name.empty() || name.size() > 128 || !chars_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("name \"", name, "\": must be 1-128 characters of [A-Za-z0-9_.-]"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- SharedMemoryRegion

absl::StatusOr<std::shared_ptr<SharedMemoryRegion>> SharedMemoryRegion::Map(
    std::string name, std::string key, int64_t offset, int64_t size, absl::string_view prefix) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset: must be >= 0 (got ", offset, ")"));
  }
  if (size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("byte_size: must be > 0 (got ", size, ")"));
  }
  std::shared_ptr<SharedMemoryRegion> r(new SharedMemoryRegion());
  r->name_ = std::move(name);
  r->key_ = std::move(key);
  r->offset_ = offset;
  r->size_ = size;
  r->fd_ = shm_open(r->key_.c_str(), O_RDWR, 0);
  if (r->fd_ < 0) return OpenError(r->key_, errno);
  struct stat st;
  if (fstat(r->fd_, &st) != 0) {
    return absl::InternalError(absl::StrCat("key \"", r->key_, "\": fstat: ", std::strerror(errno)));
  }
  // The proof first, read without mapping anything: until it is found, the object's size is
  // not told and no page of it is touched.
  if (!prefix.empty()) {
    std::string found(prefix.size(), '\0');
    const bool fits = offset <= st.st_size &&
                      static_cast<int64_t>(prefix.size()) <= st.st_size - offset;
    if (!fits || pread(r->fd_, found.data(), found.size(), offset) != static_cast<ssize_t>(found.size()) ||
        found != prefix) {
      return absl::PermissionDeniedError(absl::StrCat(
          "proof: the region of \"", r->key_, "\" at offset ", offset,
          " does not start with it; write the proof there before registering (the server "
          "registers only objects the caller can write)"));
    }
  }
  if (offset > st.st_size || size > st.st_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offset + byte_size: the region ", ByteRange(offset, size), " is outside the object \"",
        r->key_, "\" of ", st.st_size, " bytes"));
  }
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t start = offset / page * page;
  r->mapping_bytes_ = static_cast<size_t>(offset + size - start);
  // MAP_POPULATE: the page tables are filled now, at registration, rather than by a page
  // fault per 4 KiB page during the first requests (~30 ms for 256 MiB).
  void* p = mmap(nullptr, r->mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                 r->fd_, start);
  if (p == MAP_FAILED) {
    const int err = errno;
    r->mapping_ = nullptr;
    if (err == EACCES) {
      return absl::PermissionDeniedError(
          absl::StrCat("key \"", r->key_, "\": mmap read-write: ", std::strerror(err)));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("key \"", r->key_, "\": mmap of ", r->mapping_bytes_, " bytes: ", std::strerror(err)));
  }
  r->mapping_ = p;
  r->data_ = static_cast<char*>(p) + (offset - start);
  return r;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (mapping_ != nullptr && munmap(mapping_, mapping_bytes_) != 0) {
    spdlog::warn("munmap of shared-memory region \"{}\" ({}): {}", name_, key_, std::strerror(errno));
  }
  if (fd_ >= 0) close(fd_);
}

absl::Status SharedMemoryRegion::CheckStillMapped() const {
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    return absl::InternalError(absl::StrCat("key \"", key_, "\": fstat: ", std::strerror(errno)));
  }
  if (st.st_size < offset_ + size_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory region \"", name_, "\": its object \"", key_, "\" was shrunk to ",
        st.st_size, " bytes, below the registered end ", offset_ + size_,
        "; unregister and register it again"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- SharedMemoryRegistry

absl::Status SharedMemoryRegistry::CheckKey(absl::string_view key) const {
  if (!absl::StartsWith(key, kSharedMemoryKeyPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key \"", key, "\": the server opens only objects named \"", kSharedMemoryKeyPrefix,
        "...\" (as the clients name what they create)"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::CheckRoomLocked(absl::string_view owner) const {
  auto it = regions_.find(owner);
  if (it != regions_.end() && it->second.size() >= kMaxRegionsPerClient) {
    return absl::ResourceExhaustedError(absl::StrCat("client \"", owner, "\" has ", it->second.size(),
                                                     " shared-memory regions; the limit is ",
                                                     kMaxRegionsPerClient));
  }
  if (regions_held_ >= max_regions_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", regions_held_, " shared-memory regions of all its callers; the limit is ",
        max_regions_, " (--max_shared_memory_regions)"));
  }
  // Each region holds a descriptor: at most an eighth of the descriptor limit, so that regions
  // cannot take the descriptors connections need (they are bounded to the limit less a quarter).
  const int64_t descriptors = OpenDescriptorLimit();
  if (regions_held_ >= descriptors / 8) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", regions_held_, " shared-memory regions of all its callers; with ",
        descriptors, " open descriptors allowed (ulimit -n) the limit is an eighth of them"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SharedMemoryRegistry::IssueProof(absl::string_view owner,
                                                             absl::string_view key,
                                                             int64_t offset) const {
  if (!enabled_) return SharedMemoryDisabledError();
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset: must be >= 0 (got ", offset, ")"));
  }
  return proofs_.Issue(owner, key, offset, absl::Now());
}

absl::Status SharedMemoryRegistry::Register(absl::string_view owner, absl::string_view name,
                                            absl::string_view key, int64_t offset,
                                            int64_t byte_size, absl::string_view proof) {
  if (!enabled_) return SharedMemoryDisabledError();
  if (absl::Status s = CheckRegionName(name); !s.ok()) return s;
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (byte_size < SharedMemoryProofs::kProofBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte_size: ", byte_size, " bytes cannot hold the registration proof (",
        SharedMemoryProofs::kProofBytes, " bytes at the start of the region)"));
  }
  // Before the object is even opened: a caller without a proof of its own makes the server
  // touch nothing.
  if (absl::Status s = proofs_.Check(owner, key, offset, proof, absl::Now()); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(owner);
    if (it != regions_.end() && it->second.contains(name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("name \"", name, "\": a shared-memory region of that name is registered"));
    }
    if (absl::Status s = CheckRoomLocked(owner); !s.ok()) return s;
  }
  // Mapped outside the lock (a system call or two); the name is checked again below.
  // Mapped only once the proof is found in the object: written there by whoever can write it.
  auto region = SharedMemoryRegion::Map(std::string(name), std::string(key), offset, byte_size, proof);
  if (!region.ok()) return region.status();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckRoomLocked(owner); !s.ok()) return s;  // others registered meanwhile
  auto& mine = regions_[owner];
  if (!mine.emplace(std::string(name), *std::move(region)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("name \"", name, "\": a shared-memory region of that name is registered"));
  }
  ++regions_held_;
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Unregister(absl::string_view owner, absl::string_view name) {
  if (!enabled_) return SharedMemoryDisabledError();
  // Unmapped after the lock is released (unless a job still holds them).
  absl::flat_hash_map<std::string, std::shared_ptr<SharedMemoryRegion>> dropped;
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(owner);
  if (name.empty()) {
    if (it != regions_.end()) {
      regions_held_ -= static_cast<int>(it->second.size());
      dropped.swap(it->second);
      regions_.erase(it);
    }
    return absl::OkStatus();
  }
  if (it == regions_.end() || !it->second.contains(name)) {
    return absl::NotFoundError(
        absl::StrCat("name \"", name, "\": no shared-memory region of that name is registered"));
  }
  auto node = it->second.extract(name);
  dropped.emplace(std::string(name), std::move(node.mapped()));
  --regions_held_;
  if (it->second.empty()) regions_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SharedMemoryRegion>> SharedMemoryRegistry::Find(
    absl::string_view owner, absl::string_view name) const {
  if (!enabled_) return SharedMemoryDisabledError();
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(owner);
  if (it != regions_.end()) {
    if (auto r = it->second.find(name); r != it->second.end()) return r->second;
  }
  return absl::NotFoundError(
      absl::StrCat("no shared-memory region \"", name, "\" is registered"));
}

std::vector<std::shared_ptr<SharedMemoryRegion>> SharedMemoryRegistry::List(
    absl::string_view owner) const {
  std::vector<std::shared_ptr<SharedMemoryRegion>> out;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(owner);
    if (it == regions_.end()) return out;
    for (const auto& [name, r] : it->second) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return out;
}

void SharedMemoryRegistry::Clear() {
  decltype(regions_) dropped;
  absl::MutexLock lock(&mu_);
  dropped.swap(regions_);
  regions_held_ = 0;
}

SharedMemoryStats SharedMemoryRegistry::Stats() const {
  SharedMemoryStats s;
  absl::MutexLock lock(&mu_);
  for (const auto& [owner, mine] : regions_) {
    for (const auto& [name, r] : mine) {
      ++s.regions;
      s.bytes += r->size();
    }
  }
  return s;
}

}  // namespace gpucompute
