// SharedMemoryRegion (see shared_memory_region.h).
#include "client/cpp/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute::client {
namespace {

std::string UniqueKey() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return absl::StrCat("/gpucompute-", getpid(), "-", counter++, "-", rd() % 1000000);
}

absl::Status Errno(absl::string_view what, const std::string& key) {
  const int err = errno;
  const std::string msg = absl::StrCat(what, " ", key, ": ", std::strerror(err));
  switch (err) {
    case EEXIST: return absl::AlreadyExistsError(msg);
    case ENOENT: return absl::NotFoundError(msg);
    case EACCES: return absl::PermissionDeniedError(msg);
    case ENOMEM:
    case ENOSPC: return absl::ResourceExhaustedError(msg);
    default: return absl::InternalError(msg);
  }
}

}  // namespace

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(int64_t size, std::string key) {
  if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("size must be > 0, got ", size));
  if (key.empty()) key = UniqueKey();
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Errno("shm_open", key);
  SharedMemoryRegion r;
  r.key_ = std::move(key);
  r.unlink_ = true;  // from here on the destructor cleans up
  if (ftruncate(fd, size) != 0) {
    absl::Status s = Errno("ftruncate", r.key_);
    close(fd);
    return s;
  }
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    absl::Status s = Errno("mmap", r.key_);
    close(fd);
    return s;
  }
  close(fd);  // the mapping keeps the object
  r.data_ = static_cast<char*>(p);
  r.size_ = size;
  return r;
}

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Open(std::string key) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open", key);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shared-memory object ", key, " is empty"));
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Errno("mmap", key);
  SharedMemoryRegion r;
  r.key_ = std::move(key);
  r.data_ = static_cast<char*>(p);
  r.size_ = st.st_size;
  return r;
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept
    : key_(std::move(other.key_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      unlink_(std::exchange(other.unlink_, false)) {}

SharedMemoryRegion& SharedMemoryRegion::operator=(SharedMemoryRegion&& other) noexcept {
  if (this != &other) {
    Release();
    key_ = std::move(other.key_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    unlink_ = std::exchange(other.unlink_, false);
  }
  return *this;
}

SharedMemoryRegion::~SharedMemoryRegion() { Release(); }

void SharedMemoryRegion::Release() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(size_));
  if (unlink_) shm_unlink(key_.c_str());
  data_ = nullptr;
  size_ = 0;
  unlink_ = false;
}

}  // namespace gpucompute::client

namespace gpucompute::client {

absl::Status WriteToSharedMemoryObject(const std::string& key, int64_t offset,
                                       absl::string_view bytes) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open", key);
  int64_t done = 0;
  while (done < static_cast<int64_t>(bytes.size())) {
    const ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const absl::Status s = n < 0 ? Errno("pwrite", key)
                                   : absl::InvalidArgumentError(absl::StrCat(
                                         "pwrite ", key, ": offset ", offset, " is past its end"));
      close(fd);
      return s;
    }
    done += n;
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace gpucompute::client
