// SHA-256, the validated kernel cache directory, and its framed cache files (see the header).
#include "server/device/kernel_cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace gpucompute {
namespace {

constexpr char kMagic[8] = {'G', 'P', 'C', 'K', 'E', 'R', 'N', '\n'};
constexpr size_t kVersionOffset = 8;
constexpr size_t kKeyLengthOffset = 12;
constexpr size_t kPayloadSizeOffset = 16;
constexpr size_t kDigestOffset = 24;
constexpr size_t kKeyOffset = kDigestOffset + Sha256::kDigestBytes;
static_assert(kKeyOffset + KernelCacheDir::kMaxKeyBytes == KernelCacheDir::kHeaderBytes);

void PutLe(std::string& out, size_t offset, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[offset + i] = static_cast<char>(value >> (8 * i));
}

uint64_t GetLe(absl::string_view in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= uint64_t{static_cast<uint8_t>(in[offset + i])} << (8 * i);
  }
  return value;
}

std::string ErrnoText(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

// Closes a descriptor at scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

absl::Status CheckName(absl::string_view key, absl::string_view suffix) {
  const bool key_ok = !key.empty() && key.size() <= KernelCacheDir::kMaxKeyBytes &&
                      std::all_of(key.begin(), key.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                      });
  const bool suffix_ok = suffix.size() >= 2 && suffix.size() <= 16 && suffix[0] == '.' &&
                         std::all_of(suffix.begin() + 1, suffix.end(), [](char c) {
                           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                  (c >= 'A' && c <= 'Z');
                         });
  if (!key_ok || !suffix_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad kernel cache file name \"", key, suffix,
        "\": want 1..64 lower-case hex digits and a suffix such as .cubin"));
  }
  return absl::OkStatus();
}

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

// --- SHA-256 ----------------------------------------------------------------------------------

// OpenSSL's digest calls fail only without memory, and a wrong key costs a cache miss (entries
// are checked against their own digest when read): their results are not checked here.
Sha256::Sha256() : context_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(context_, EVP_sha256(), nullptr); }

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

void Sha256::Update(const void* data, size_t n) { EVP_DigestUpdate(context_, data, n); }

Sha256::Digest Sha256::Finish() {
  Digest digest{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_, digest.data(), &length);
  return digest;
}

std::string HexDigest(const Sha256::Digest& digest, size_t bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  bytes = std::min(bytes, digest.size());
  std::string hex;
  hex.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

// --- The directory ----------------------------------------------------------------------------

absl::StatusOr<KernelCacheDir> KernelCacheDir::Open(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel cache directory \"", path, "\" must be an absolute path"));
  }
  // Rebuilt from its components: no "//", no ".", and no trailing "/" (which would make the
  // kernel follow a symlink in the last component despite O_NOFOLLOW).
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel cache directory \"", path, "\" must not contain a \"..\" component"));
    }
    if (part != ".") parts.push_back(part);
  }
  if (parts.empty()) {
    return absl::InvalidArgumentError("the kernel cache directory cannot be \"/\"");
  }

  // Create what is missing, each new level 0700 (less under a stricter umask). Existing
  // levels are not changed: they may be shared (/var/cache) or not ours to change.
  std::string normal;
  for (absl::string_view part : parts) {
    absl::StrAppend(&normal, "/", part);
    struct stat st;
    if (stat(normal.c_str(), &st) == 0) continue;
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel cache directory ", path, ": cannot look at ", normal, ": ", ErrnoText(errno)));
    }
    if (mkdir(normal.c_str(), 0700) != 0 && errno != EEXIST) {  // EEXIST: another replica
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel cache directory ", path, ": cannot create ", normal, ": ", ErrnoText(errno)));
    }
  }

  const int fd = open(normal.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st;
    if (err == ELOOP || (lstat(normal.c_str(), &st) == 0 && S_ISLNK(st.st_mode))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel cache directory ", path, " is a symbolic link; give the real directory"));
    }
    if (err == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel cache directory ", path, " is not a directory"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open kernel cache directory ", path, ": ", ErrnoText(err)));
  }
  KernelCacheDir dir(normal, fd);  // closes fd on the error paths below

  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat kernel cache directory ", path, ": ", ErrnoText(errno)));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel cache directory ", path, " is owned by uid ", st.st_uid, ", not by this ",
        "process's uid ", geteuid(), "; use a directory of its own"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel cache directory %s has mode %04o: others could plant kernels in it; "
        "remove group and other write permission (chmod go-w) or use another directory",
        path, st.st_mode & 07777));
  }
  return dir;
}

KernelCacheDir::KernelCacheDir(KernelCacheDir&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

KernelCacheDir& KernelCacheDir::operator=(KernelCacheDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

KernelCacheDir::~KernelCacheDir() {
  if (fd_ >= 0) close(fd_);
}

std::string KernelCacheDir::FilePath(absl::string_view key, absl::string_view suffix) const {
  return absl::StrCat(path_, "/", key, suffix);
}

absl::StatusOr<std::string> KernelCacheDir::Read(absl::string_view key,
                                                 absl::string_view suffix) const {
  RETURN_IF_ERROR(CheckName(key, suffix));
  const std::string name = absl::StrCat(key, suffix);
  const std::string shown = FilePath(key, suffix);
  // O_NONBLOCK: a FIFO planted under the name must not block the open; fstat refuses it.
  const int fd = openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(shown, " does not exist"));
    if (err == ELOOP) return absl::DataLossError(absl::StrCat(shown, " is a symbolic link"));
    return absl::DataLossError(absl::StrCat("cannot open ", shown, ": ", ErrnoText(err)));
  }
  FdCloser closer(fd);

  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::DataLossError(absl::StrCat("cannot stat ", shown, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat(shown, " is not a regular file"));
  }
  if (st.st_uid != geteuid()) {
    return absl::DataLossError(absl::StrCat(shown, " is owned by uid ", st.st_uid));
  }
  if (st.st_size > kMaxFileBytes) {
    return absl::DataLossError(absl::StrCat(shown, " is ", st.st_size, " bytes, more than the ",
                                            kMaxFileBytes, "-byte limit"));
  }
  if (st.st_size < static_cast<off_t>(kHeaderBytes)) {
    return absl::DataLossError(absl::StrCat(shown, " is ", st.st_size,
                                            " bytes, shorter than the header"));
  }

  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t have = 0;
  while (have < data.size()) {
    const ssize_t n = read(fd, data.data() + have, data.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(absl::StrCat("cannot read ", shown, ": ", ErrnoText(errno)));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have != data.size()) {
    return absl::DataLossError(absl::StrCat(shown, " shrank while being read"));
  }

  const absl::string_view header(data.data(), kHeaderBytes);
  if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(shown, " is not a gpucompute kernel cache file"));
  }
  const uint64_t version = GetLe(header, kVersionOffset, 4);
  if (version != kFormatVersion) {
    return absl::DataLossError(absl::StrCat(shown, " has format version ", version, ", not ",
                                            kFormatVersion));
  }
  const uint64_t key_length = GetLe(header, kKeyLengthOffset, 4);
  if (key_length != key.size() || header.substr(kKeyOffset, key.size()) != key) {
    return absl::DataLossError(absl::StrCat(shown, " holds another key's kernel"));
  }
  const uint64_t payload_size = GetLe(header, kPayloadSizeOffset, 8);
  if (payload_size != data.size() - kHeaderBytes) {
    return absl::DataLossError(absl::StrCat(shown, " says its payload is ", payload_size,
                                            " bytes but holds ", data.size() - kHeaderBytes));
  }
  const absl::string_view payload = absl::string_view(data).substr(kHeaderBytes);
  const Sha256::Digest digest = Sha256::Of(payload);
  if (std::memcmp(digest.data(), header.data() + kDigestOffset, digest.size()) != 0) {
    return absl::DataLossError(absl::StrCat(shown, " fails its checksum"));
  }
  data.erase(0, kHeaderBytes);
  return data;
}

absl::Status KernelCacheDir::Write(absl::string_view key, absl::string_view suffix,
                                   absl::string_view payload) const {
  RETURN_IF_ERROR(CheckName(key, suffix));
  if (payload.size() > static_cast<uint64_t>(kMaxFileBytes) - kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a ", payload.size(),
                                                   "-byte kernel image is too big to cache"));
  }
  std::string header(kHeaderBytes, '\0');
  std::memcpy(header.data(), kMagic, sizeof(kMagic));
  PutLe(header, kVersionOffset, kFormatVersion, 4);
  PutLe(header, kKeyLengthOffset, key.size(), 4);
  PutLe(header, kPayloadSizeOffset, payload.size(), 8);
  const Sha256::Digest digest = Sha256::Of(payload);
  std::memcpy(header.data() + kDigestOffset, digest.data(), digest.size());
  std::memcpy(header.data() + kKeyOffset, key.data(), key.size());

  // A private temporary renamed into place: readers (this process or another replica sharing
  // the directory) see either no file or a whole one.
  static std::atomic<uint64_t> counter{0};
  const std::string name = absl::StrCat(key, suffix);
  const std::string tmp = absl::StrCat(name, ".tmp.", getpid(), ".", counter.fetch_add(1));
  const int fd =
      openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path_, "/", tmp, ": ", ErrnoText(errno)));
  }
  bool ok = WriteAll(fd, header) && WriteAll(fd, payload);
  int err = ok ? 0 : errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlinkat(fd_, tmp.c_str(), 0);
    return absl::UnavailableError(
        absl::StrCat("cannot write ", FilePath(key, suffix), ": ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

}  // namespace gpucompute
