// The NVRTC kernel cache: SHA-256 keys, in-memory entries with once-per-key builds, an
// on-disk CUBIN directory written atomically, and libraries loaded through the CUDA runtime.
#include "server/runtime/cuda/kernel_cache.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>

#include <nvrtc.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/runtime/cuda/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// Bump when anything the key does not cover changes what Compile produces (e.g. the options
// the cache adds), so that old disk entries are no longer found.
constexpr std::string_view kKeyFormat = "gpucompute-kernel-cache-v1;default:-std=c++17";

// SHA-256 (FIPS 180-4). The key must be the same in every process and build (it names files
// shared across restarts and replicas), which rules out absl::Hash; a standard digest also
// makes accidental collisions between kernel variants a non-issue.
class Sha256 {
 public:
  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_bytes_ += n;
    if (buffered_ > 0) {
      size_t take = std::min(n, sizeof(buffer_) - buffered_);
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < sizeof(buffer_)) return;
      Block(buffer_);
      buffered_ = 0;
    }
    for (; n >= 64; p += 64, n -= 64) Block(p);
    std::memcpy(buffer_, p, n);
    buffered_ = n;
  }

  std::array<uint8_t, 32> Finish() {
    const uint64_t bits = total_bytes_ * 8;
    const uint8_t pad = 0x80;
    Update(&pad, 1);
    const uint8_t zero = 0;
    while (buffered_ != 56) Update(&zero, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    Update(length, 8);
    std::array<uint8_t, 32> digest;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    }
    return digest;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void Block(const uint8_t* p) {
    static constexpr uint32_t kK[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{p[4 * i]} << 24) | (uint32_t{p[4 * i + 1]} << 16) |
             (uint32_t{p[4 * i + 2]} << 8) | uint32_t{p[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3];
    uint32_t e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + kK[i] + w[i];
      uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Each field is length-prefixed so that no two different specs hash the same bytes (source
// "ab" + option "c" vs source "a" + option "bc").
void AddField(Sha256& sha, std::string_view field) {
  uint8_t length[8];
  const uint64_t n = field.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(n >> (8 * i));
  sha.Update(length, sizeof(length));
  sha.Update(field.data(), field.size());
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsStdOption(std::string_view option) {
  return StartsWith(option, "-std=") || StartsWith(option, "--std=") || option == "-std" ||
         option == "--std";
}

bool IsArchOption(std::string_view option) {
  return StartsWith(option, "-arch") || StartsWith(option, "--gpu-architecture");
}

// Owns an nvrtcProgram.
class NvrtcProgram {
 public:
  NvrtcProgram() = default;
  ~NvrtcProgram() {
    if (program_ == nullptr) return;
    nvrtcResult err = nvrtcDestroyProgram(&program_);
    if (err != NVRTC_SUCCESS) spdlog::warn("nvrtcDestroyProgram failed: {}", nvrtcGetErrorString(err));
  }
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;

  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

absl::StatusOr<std::vector<int>> SupportedArchs() {
  int count = 0;
  NVRTC_RETURN_IF_ERROR(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(static_cast<size_t>(std::max(count, 0)));
  if (count > 0) NVRTC_RETURN_IF_ERROR(nvrtcGetSupportedArchs(archs.data()));
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::string LogCudaError(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

}  // namespace

// One kernel variant. `state` and `status` are guarded by KernelCache::mu_ (the annotation
// cannot name the outer mutex). The other fields are written only by the thread that builds
// the entry, while it is kBuilding, and are read only after a reader has seen kReady under mu_.
struct KernelCache::Entry {
  enum class State { kBuilding, kReady, kFailed };
  State state = State::kBuilding;
  absl::Status status;  // kFailed: why the last build failed

  std::string label;
  // The loaded image is kept for the library's lifetime: with lazy module loading the runtime
  // may load it into a context only at the first launch.
  std::string image;
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
};

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Create(int device, int arch,
                                                                 std::string disk_dir) {
  if (device < 0) return absl::InvalidArgumentError(absl::StrCat("bad device index ", device));
  if (arch <= 0) return absl::InvalidArgumentError(absl::StrCat("bad architecture ", arch));
  ASSIGN_OR_RETURN(std::vector<int> archs, SupportedArchs());
  if (archs.empty()) return absl::FailedPreconditionError("NVRTC reports no architectures");

  std::string target;
  bool ptx = false;
  if (std::find(archs.begin(), archs.end(), arch) != archs.end()) {
    target = absl::StrCat("sm_", arch);
  } else {
    int best = 0;
    for (int a : archs) {
      if (a / 10 == arch / 10 && a < arch) best = std::max(best, a);
    }
    if (best > 0) {
      target = absl::StrCat("sm_", best);
    } else if (arch > archs.back()) {
      target = absl::StrCat("compute_", archs.back());
      ptx = true;
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat("NVRTC ", NvrtcVersion(), " cannot generate code for sm_", arch,
                       " (it supports sm_", absl::StrJoin(archs, ", sm_"), ")"));
    }
    spdlog::warn("kernel cache: NVRTC {} has no sm_{}; compiling for {}{}", NvrtcVersion(), arch,
                 target, ptx ? " (PTX, JIT-compiled by the driver)" : "");
  }

  if (!disk_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(disk_dir, ec);
    if (ec || !std::filesystem::is_directory(disk_dir, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create kernel cache directory ", disk_dir, ": ",
                       ec ? ec.message() : "not a directory"));
    }
  }
  spdlog::info("kernel cache: device {} target {} NVRTC {} directory {}", device, target,
               NvrtcVersion(), disk_dir.empty() ? "(memory only)" : disk_dir);
  return std::unique_ptr<KernelCache>(
      new KernelCache(device, arch, std::move(target), ptx, std::move(disk_dir)));
}

KernelCache::KernelCache(int device, int arch, std::string target, bool ptx,
                         std::string disk_dir)
    : device_(device),
      arch_(arch),
      target_(std::move(target)),
      ptx_(ptx),
      disk_dir_(std::move(disk_dir)) {
  stats_.directory = disk_dir_;
}

KernelCache::~KernelCache() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, entry] : entries_) {
    if (entry->library == nullptr) continue;
    cudaError_t err = cudaLibraryUnload(entry->library);
    if (err != cudaSuccess) {
      // At process exit the runtime may already be gone; nothing is left to free then.
      if (err != cudaErrorCudartUnloading) {
        spdlog::warn("kernel cache: unloading {} failed: {}", entry->label, LogCudaError(err));
      }
      (void)cudaGetLastError();
    }
  }
}

std::string KernelCache::NvrtcVersion() {
  // Fixed for the process (the library is loaded once); every Key asks for it.
  static const std::string* const version = [] {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return new std::string("unknown");
    return new std::string(absl::StrCat(major, ".", minor));
  }();
  return *version;
}

std::string KernelCache::Key(const KernelSpec& spec) const {
  Sha256 sha;
  AddField(sha, kKeyFormat);
  AddField(sha, NvrtcVersion());
  AddField(sha, target_);
  // The program name can reach the code (__FILE__, diagnostics); the kernel name picks the
  // handle an entry holds. The label is only a display name and is left out.
  AddField(sha, spec.program_name);
  AddField(sha, spec.kernel_name);
  AddField(sha, spec.source);
  AddField(sha, absl::StrCat("headers:", spec.headers.size()));
  for (const auto& [name, contents] : spec.headers) {
    AddField(sha, name);
    AddField(sha, contents);
  }
  AddField(sha, absl::StrCat("options:", spec.options.size()));
  for (const std::string& option : spec.options) AddField(sha, option);

  // 128 bits of the digest: plenty against accidental collisions, and short file names.
  const std::array<uint8_t, 32> digest = sha.Finish();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key;
  key.reserve(32);
  for (int i = 0; i < 16; ++i) {
    key.push_back(kHex[digest[i] >> 4]);
    key.push_back(kHex[digest[i] & 0xf]);
  }
  return key;
}

absl::StatusOr<cudaKernel_t> KernelCache::GetTagged(const std::string& tag,
                                                    const std::function<KernelSpec()>& make_spec) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tagged_.find(tag); it != tagged_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  auto kernel = Get(make_spec());
  if (kernel.ok()) {
    absl::MutexLock lock(&mu_);
    tagged_.emplace(tag, *kernel);
  }
  return kernel;
}

absl::StatusOr<cudaKernel_t> KernelCache::Get(const KernelSpec& spec) {
  if (spec.source.empty() || spec.kernel_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel spec ", spec.label, " needs a source and a kernel name"));
  }
  for (const std::string& option : spec.options) {
    if (IsArchOption(option)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel spec ", spec.label, ": option ", option, " is not allowed (the cache sets -arch)"));
    }
  }
  const std::string key = Key(spec);

  Entry* entry = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = entries_.try_emplace(key);
    if (inserted) it->second = std::make_unique<Entry>();
    // The Entry's address is stable; `it` is not once Await lets other threads insert.
    entry = it->second.get();
    if (!inserted) {
      if (entry->state == Entry::State::kBuilding) {
        // Another thread is building this key: wait for its result rather than build twice.
        mu_.Await(absl::Condition(
            +[](Entry* e) { return e->state != Entry::State::kBuilding; }, entry));
        if (entry->state == Entry::State::kFailed) return entry->status;
      }
      if (entry->state == Entry::State::kReady) {
        ++stats_.hits;
        return entry->kernel;
      }
      // kFailed before we arrived: build it again (the failure may have been transient).
      entry->state = Entry::State::kBuilding;
    }
    ++stats_.misses;
  }

  bool from_disk = false;
  double compile_ms = 0;
  absl::Status status = Build(spec, key, entry, &from_disk, &compile_ms);

  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    entry->state = Entry::State::kFailed;
    entry->status = status;
    return status;
  }
  entry->state = Entry::State::kReady;
  entry->status = absl::OkStatus();
  ++stats_.entries;
  stats_.kernels.push_back(entry->label);
  if (from_disk) {
    ++stats_.disk_hits;
  } else {
    stats_.compile_ms_total += compile_ms;
  }
  return entry->kernel;
}

absl::Status KernelCache::Build(const KernelSpec& spec, const std::string& key, Entry* entry,
                                bool* from_disk, double* compile_ms) const {
  *from_disk = false;
  *compile_ms = 0;
  entry->label = spec.label.empty() ? spec.kernel_name : spec.label;

  if (!disk_dir_.empty()) {
    const std::string path = DiskPath(key);
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.bad() && !image.empty()) {
        entry->image = std::move(image);
        absl::Status loaded = Load(spec, entry);
        if (loaded.ok()) {
          *from_disk = true;
          spdlog::debug("kernel cache: {} key {} loaded from {}", entry->label,
                        key.substr(0, 12), path);
          return absl::OkStatus();
        }
        // A truncated or foreign file: rebuild it (and overwrite it below).
        spdlog::warn("kernel cache: ignoring {}: {}", path, loaded.ToString());
        entry->image.clear();
      }
    }
  }

  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(entry->image, Compile(spec));
  *compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("kernel cache: compiled {} (key {}, {} for sm_{}) in {:.1f} ms", entry->label,
               key.substr(0, 12), target_, arch_, *compile_ms);
  // Load before saving, so that only an image that loads is ever written to disk.
  RETURN_IF_ERROR(Load(spec, entry));
  if (!disk_dir_.empty()) WriteToDisk(key, entry->image);
  return absl::OkStatus();
}

absl::StatusOr<std::string> KernelCache::Compile(const KernelSpec& spec) const {
  std::vector<const char*> header_sources;
  std::vector<const char*> header_names;
  for (const auto& [name, contents] : spec.headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(contents.c_str());
  }
  const std::string program_name = spec.program_name.empty() ? "kernel.cu" : spec.program_name;
  NvrtcProgram program;
  NVRTC_RETURN_IF_ERROR(nvrtcCreateProgram(
      program.out(), spec.source.c_str(), program_name.c_str(),
      static_cast<int>(header_sources.size()), header_sources.data(), header_names.data()));

  std::vector<std::string> options = {absl::StrCat("-arch=", target_)};
  if (std::none_of(spec.options.begin(), spec.options.end(),
                   [](const std::string& o) { return IsStdOption(o); })) {
    options.push_back("-std=c++17");
  }
  options.insert(options.end(), spec.options.begin(), spec.options.end());
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());

  const nvrtcResult result = nvrtcCompileProgram(
      program.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  const std::string log = ProgramLog(program.get());
  if (result != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat(
        "NVRTC could not compile ", spec.label, " (", program_name, ", ",
        absl::StrJoin(options, " "), "): ", nvrtcGetErrorString(result), "\n", log));
  }
  if (!log.empty()) spdlog::debug("kernel cache: NVRTC log for {}:\n{}", spec.label, log);

  std::string image;
  size_t size = 0;
  if (ptx_) {
    NVRTC_RETURN_IF_ERROR(nvrtcGetPTXSize(program.get(), &size));
    image.resize(size);
    NVRTC_RETURN_IF_ERROR(nvrtcGetPTX(program.get(), image.data()));
    // The loader reads PTX up to its NUL; std::string keeps one after size() anyway.
    while (!image.empty() && image.back() == '\0') image.pop_back();
  } else {
    NVRTC_RETURN_IF_ERROR(nvrtcGetCUBINSize(program.get(), &size));
    image.resize(size);
    NVRTC_RETURN_IF_ERROR(nvrtcGetCUBIN(program.get(), image.data()));
  }
  if (image.empty()) {
    return absl::InternalError(absl::StrCat("NVRTC produced an empty image for ", spec.label));
  }
  return image;
}

absl::Status KernelCache::Load(const KernelSpec& spec, Entry* entry) const {
  entry->library = nullptr;
  entry->kernel = nullptr;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  cudaLibrary_t library = nullptr;
  CUDA_RETURN_IF_ERROR(
      cudaLibraryLoadData(&library, entry->image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));

  // On failure past this point the library goes again and the error names the kernel.
  auto fail = [&](cudaError_t err, const char* expr, int line) {
    absl::Status status = CudaErrorStatus(err, expr, __FILE__, line);
    cudaError_t unload = cudaLibraryUnload(library);
    if (unload != cudaSuccess) {
      spdlog::warn("kernel cache: unloading {} failed: {}", entry->label, LogCudaError(unload));
      (void)cudaGetLastError();
    }
    entry->kernel = nullptr;
    return absl::Status(status.code(), absl::StrCat(status.message(), " (kernel ",
                                                    spec.kernel_name, " of ", entry->label, ")"));
  };
  cudaKernel_t kernel = nullptr;
  cudaError_t err = cudaLibraryGetKernel(&kernel, library, spec.kernel_name.c_str());
  if (err != cudaSuccess) return fail(err, "cudaLibraryGetKernel", __LINE__);
  // With lazy module loading (the default) the image would reach the device only at the first
  // launch, inside some request. Asking for the attributes loads it into this device's context
  // now, and shows a bad image here, where a disk entry can still be rebuilt.
  cudaFuncAttributes attributes{};
  err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel));
  if (err != cudaSuccess) return fail(err, "cudaFuncGetAttributes", __LINE__);
  spdlog::debug("kernel cache: {} uses {} registers, {} B shared, {} B local, up to {} threads",
                entry->label, attributes.numRegs, attributes.sharedSizeBytes,
                attributes.localSizeBytes, attributes.maxThreadsPerBlock);
  entry->library = library;
  entry->kernel = kernel;
  return absl::OkStatus();
}

std::string KernelCache::DiskPath(const std::string& key) const {
  return absl::StrCat(disk_dir_, "/", key, ptx_ ? ".ptx" : ".cubin");
}

void KernelCache::WriteToDisk(const std::string& key, const std::string& image) const {
  // Write a private temporary and rename it into place: readers (this process or another
  // replica sharing the directory) see either no file or a whole one.
  static std::atomic<uint64_t> counter{0};
  const std::string path = DiskPath(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    out.close();
    if (!out) {
      spdlog::warn("kernel cache: cannot write {}", tmp);
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    spdlog::warn("kernel cache: cannot rename {} to {}: {}", tmp, path, ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

KernelCacheStats KernelCache::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gpucompute
