// Kernel cache in four verbs: build (NVRTC -> CUBIN for the device's own architecture), load
// (cudaLibraryLoadData), launch (the caller, via cudaLaunchKernel on the returned handle),
// release (destructor). Keyed by a hash of source + headers + options + architecture + NVRTC
// version; kept in memory and, when a directory is given, on disk for warm starts (the
// directory rules and file format are in server/device/kernel_cache_dir.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/device/device_info.h"
#include "server/device/kernel_cache_dir.h"

namespace gpucompute {

// What to compile: one NVRTC program and the one extern "C" kernel taken from it.
struct KernelSpec {
  std::string label;         // variant name for logs and ServerInfo, e.g. "lombscargle<f32,uniform,k8>"
  std::string program_name;  // e.g. "lombscargle.cu"
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, contents)
  // Passed to NVRTC as given (e.g. "-DLS_T=float"; nothing like --use_fast_math is implied).
  // The cache adds -arch=sm_XX (an -arch option here is INVALID_ARGUMENT) and -std=c++17
  // unless a -std= option is given.
  std::vector<std::string> options;
  std::string kernel_name;  // extern "C" symbol
};

class KernelCache {
 public:
  // `arch` is 10 * major + minor (e.g. 90). `disk_dir` may be empty (memory only); it is
  // created 0700 when missing. A directory that cannot be used (KernelCacheDir::Open: not
  // absolute, "..", a symlink, not ours, writable by others, cannot be created) is not an
  // error: it is logged as a warning and the cache keeps kernels in memory only
  // (Stats().directory is then empty), because the disk only saves compile time at start-up.
  // Makes no CUDA runtime call, so it (and Key) work without a device; Get needs one. When
  // NVRTC cannot target sm_<arch> itself, the cache compiles for the nearest older
  // architecture of the same major version (CUBIN is binary compatible upwards within a
  // major), or, for a device newer than NVRTC knows, to PTX for the newest architecture it
  // does know, which the driver JIT-compiles on load.
  static absl::StatusOr<std::unique_ptr<KernelCache>> Create(int device, int arch,
                                                             std::string disk_dir);
  ~KernelCache();  // unloads every library (logs, never throws)
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // Thread-safe. Memory hit: returns at once. Miss: loads the CUBIN from disk if a file there
  // passes KernelCacheDir's checks (a file that fails them is logged, never loaded, and
  // overwritten), else compiles it with NVRTC (logging the compile time) and writes it to
  // disk. A compile error is INTERNAL with NVRTC's log. The handle stays valid for the
  // cache's lifetime; launch it with cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
  // ...).
  // Concurrent Gets of one missing key build it once: the others wait for that build (and
  // count as hits); a failed build is retried by the next Get that arrives after it. Builds
  // of different keys run in parallel and never block hits. Makes device_ current on the
  // calling thread. A hit still hashes the spec (SHA-256, tens of microseconds for a large
  // source): keep the handle rather than calling Get per launch in a tight loop.
  absl::StatusOr<cudaKernel_t> Get(const KernelSpec& spec);

  // misses counts Gets that found no ready entry in memory; disk_hits is the part of them
  // served from disk; compile_ms_total sums successful NVRTC compiles.
  // Like Get, for a caller whose `tag` fully determines the spec (e.g. a string of the
  // compile-time parameters of a source embedded in the binary): after the first success the
  // spec is neither built nor hashed again. Tagged lookups after the first count as hits.
  absl::StatusOr<cudaKernel_t> GetTagged(const std::string& tag,
                                         const std::function<KernelSpec()>& make_spec);

  KernelCacheStats Stats() const;
  static std::string NvrtcVersion();  // "13.0"

  // The cache key (hex) for a spec on this cache's architecture; exposed for tests.
  std::string Key(const KernelSpec& spec) const;

  // What NVRTC is asked for: "sm_90" (CUBIN) or, for a device newer than NVRTC, "compute_120"
  // (PTX).
  const std::string& target() const { return target_; }

 private:
  struct Entry;
  KernelCache(int device, int arch, std::string target, bool ptx,
              std::unique_ptr<KernelCacheDir> disk, std::string directory);

  // Fills `entry` (image, library, kernel) from disk or by compiling; runs without mu_ held,
  // while `entry` is still marked building, so no other thread reads those fields.
  absl::Status Build(const KernelSpec& spec, const std::string& key, Entry* entry,
                     bool* from_disk, double* compile_ms) const;
  absl::StatusOr<std::string> Compile(const KernelSpec& spec) const;
  absl::Status Load(const KernelSpec& spec, Entry* entry) const;
  void WriteToDisk(const std::string& key, const std::string& image) const;
  const char* DiskSuffix() const { return ptx_ ? ".ptx" : ".cubin"; }

  const int device_;
  const int arch_;
  const std::string target_;  // sm_XX or compute_XX
  const bool ptx_;            // target_ is a virtual architecture: the image is PTX
  const std::unique_ptr<KernelCacheDir> disk_;  // null: memory only
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  KernelCacheStats stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, cudaKernel_t> tagged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucompute
