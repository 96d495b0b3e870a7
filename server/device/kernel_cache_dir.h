// The kernel cache's on-disk side, free of CUDA: SHA-256 for cache keys, a validated cache
// directory, and the framed, checksummed file format that KernelCache reads and writes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "openssl/evp.h"

namespace gpucompute {

// SHA-256, OpenSSL's. Cache keys must be the same in every process and build (they name files
// shared across restarts and replicas), which rules out absl::Hash; a standard digest also makes
// accidental collisions between kernel variants a non-issue.
class Sha256 {
 public:
  static constexpr size_t kDigestBytes = 32;
  using Digest = std::array<uint8_t, kDigestBytes>;

  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t n);
  void Update(absl::string_view s) { Update(s.data(), s.size()); }
  Digest Finish();  // once; the object is spent afterwards

  static Digest Of(absl::string_view s) {
    Sha256 sha;
    sha.Update(s);
    return sha.Finish();
  }

 private:
  EVP_MD_CTX* context_;
};

// Lower-case hex of the first `bytes` bytes of `digest`.
std::string HexDigest(const Sha256::Digest& digest, size_t bytes = Sha256::kDigestBytes);

// A kernel cache directory, opened once and validated, and the files in it.
//
// Directory rules (Open): the path is absolute with no ".." component; missing components
// are created with mode 0700 (existing parents are left as they are, symlinks in them
// included); the last component must be a real directory (not a symlink) owned by the
// effective uid and writable by no one else (no group or other write bit). The directory is
// then held open and every file is reached relative to that descriptor, so swapping the path
// for something else after Open changes nothing.
//
// A directory that breaks a rule is refused rather than repaired (no chmod, no chown): the
// caller (KernelCache) logs a warning and keeps kernels in memory only. The disk cache only
// saves NVRTC compile time at start-up, so running without it is correct, just slower to warm;
// refusing to start over it would turn a permissions slip into an outage.
//
// File format, `<key><suffix>` in the directory (e.g. "3f…a1.cubin"), little-endian:
//   offset  0  8 bytes  magic "GPCKERN\n"
//   offset  8  u32      format version (kFormatVersion)
//   offset 12  u32      length of the key (1..64)
//   offset 16  u64      payload size in bytes
//   offset 24  32 bytes SHA-256 of the payload
//   offset 56  64 bytes the key, zero-padded
//   offset 120          the payload (the CUBIN or PTX image)
// Read accepts a file only when it is a regular file (opened with O_NOFOLLOW: a symlink is
// refused) owned by the effective uid, at most kMaxFileBytes long, whose magic and version
// match, whose key is the one asked for (a file copied or renamed under another key is
// refused), whose payload size equals the file's size less the header, and whose payload
// hashes to the stored SHA-256. Anything else is DATA_LOSS, and the caller rebuilds the
// image and Writes over the file. Write is atomic: a 0600 temporary in the same directory,
// then rename, so a reader sees no file or a whole one. It does not fsync: a file torn by a
// crash fails the checks above and is rebuilt.
//
// Thread-safe: Read and Write may run concurrently (also in several processes sharing the
// directory; the last rename of a key wins, and all writers write the same image).
class KernelCacheDir {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kHeaderBytes = 120;
  static constexpr size_t kMaxKeyBytes = 64;
  static constexpr int64_t kMaxFileBytes = int64_t{64} << 20;

  // INVALID_ARGUMENT for a relative path or one with "..", FAILED_PRECONDITION for a
  // directory that cannot be created or opened or that breaks the ownership rules; the
  // message says which rule and how to fix it.
  static absl::StatusOr<KernelCacheDir> Open(const std::string& path);

  KernelCacheDir(KernelCacheDir&& other) noexcept;
  KernelCacheDir& operator=(KernelCacheDir&& other) noexcept;
  KernelCacheDir(const KernelCacheDir&) = delete;
  KernelCacheDir& operator=(const KernelCacheDir&) = delete;
  ~KernelCacheDir();

  // `key` is 1..64 lower-case hex digits; `suffix` a dot and 1..15 letters or digits
  // (".cubin"). INVALID_ARGUMENT otherwise, so that no caller can name a path outside.
  //
  // The payload stored under (key, suffix). NOT_FOUND when there is no such file; DATA_LOSS
  // when there is one that fails a check (the message says which).
  absl::StatusOr<std::string> Read(absl::string_view key, absl::string_view suffix) const;
  // Stores `payload` under (key, suffix), replacing whatever is there (a symlink is replaced,
  // its target untouched). INVALID_ARGUMENT for a payload too big to be read back.
  absl::Status Write(absl::string_view key, absl::string_view suffix,
                     absl::string_view payload) const;

  const std::string& path() const { return path_; }
  // The path of the file for (key, suffix), for logs.
  std::string FilePath(absl::string_view key, absl::string_view suffix) const;

 private:
  KernelCacheDir(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;  // the directory, O_DIRECTORY | O_NOFOLLOW
};

}  // namespace gpucompute
