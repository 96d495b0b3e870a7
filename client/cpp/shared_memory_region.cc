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

absl::StatusOr<std::string> SwapSharedMemoryBytes(const std::string& key, int64_t offset,
                                                  absl::string_view bytes) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open", key);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno("fstat", key);
  const int64_t n = static_cast<int64_t>(bytes.size());
  if (offset < 0 || offset > st.st_size || n > st.st_size - offset) {  // a write would grow it
    return absl::InvalidArgumentError(absl::StrCat(key, ": bytes [", offset, ", +", n,
                                                   ") are outside the object of ", st.st_size,
                                                   " bytes (a region must hold ", n, ")"));
  }
  std::string previous(bytes.size(), '\0');
  if (pread(fd, previous.data(), previous.size(), offset) != static_cast<ssize_t>(n)) {
    return Errno("pread", key);
  }
  if (pwrite(fd, bytes.data(), bytes.size(), offset) != static_cast<ssize_t>(n)) {
    return Errno("pwrite", key);
  }
  return previous;
}

}  // namespace gpucompute::client
