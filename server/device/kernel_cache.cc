// The NVRTC kernel cache: SHA-256 keys, in-memory entries with once-per-key builds, an
// on-disk directory of verified CUBINs (KernelCacheDir), and libraries loaded through the CUDA
// runtime.
#include "server/device/kernel_cache.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include <nvrtc.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/device/kernel_cache_dir.h"
#include "server/device/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// Bump when anything the key does not cover changes what Compile produces (e.g. the options
// the cache adds), so that old disk entries are no longer found.
constexpr std::string_view kKeyFormat = "gpucompute-kernel-cache-v1;default:-std=c++17";

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

  // A bad directory costs warm starts, not correctness: warn and run from memory.
  std::unique_ptr<KernelCacheDir> disk;
  if (!disk_dir.empty()) {
    absl::StatusOr<KernelCacheDir> opened = KernelCacheDir::Open(disk_dir);
    if (opened.ok()) {
      disk = std::make_unique<KernelCacheDir>(std::move(opened).value());
    } else {
      spdlog::warn("kernel cache: not using {} on disk ({}); kernels are kept in memory only "
                   "and compiled again at every start",
                   disk_dir, opened.status().ToString());
      disk_dir.clear();
    }
  }
  spdlog::info("kernel cache: device {} target {} NVRTC {} directory {}", device, target,
               NvrtcVersion(), disk_dir.empty() ? "(memory only)" : disk_dir);
  return std::unique_ptr<KernelCache>(new KernelCache(device, arch, std::move(target), ptx,
                                                      std::move(disk), std::move(disk_dir)));
}

KernelCache::KernelCache(int device, int arch, std::string target, bool ptx,
                         std::unique_ptr<KernelCacheDir> disk, std::string directory)
    : device_(device),
      arch_(arch),
      target_(std::move(target)),
      ptx_(ptx),
      disk_(std::move(disk)) {
  stats_.directory = std::move(directory);
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

  // 128 bits of the digest: plenty against accidental collisions, and short file names. The
  // key is also stored inside the file, so a file renamed or copied to another key's name is
  // refused on reading.
  return HexDigest(sha.Finish(), 16);
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

  if (disk_ != nullptr) {
    // Only an image that passed the file checks (magic, key, size, SHA-256) reaches the
    // loader; anything else is rebuilt and overwritten below.
    absl::StatusOr<std::string> image = disk_->Read(key, DiskSuffix());
    if (image.ok() && !image->empty()) {
      entry->image = *std::move(image);
      absl::Status loaded = Load(spec, entry);
      if (loaded.ok()) {
        *from_disk = true;
        spdlog::debug("kernel cache: {} key {} loaded from {}", entry->label, key.substr(0, 12),
                      disk_->FilePath(key, DiskSuffix()));
        return absl::OkStatus();
      }
      // Intact but not loadable here (e.g. written by another driver): rebuild it.
      spdlog::warn("kernel cache: ignoring {}: {}", disk_->FilePath(key, DiskSuffix()),
                   loaded.ToString());
      entry->image.clear();
    } else if (!image.ok() && !absl::IsNotFound(image.status())) {
      spdlog::warn("kernel cache: ignoring a cached file for {}: {}; compiling it again",
                   entry->label, image.status().ToString());
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
  if (disk_ != nullptr) WriteToDisk(key, entry->image);
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

void KernelCache::WriteToDisk(const std::string& key, const std::string& image) const {
  // A failed write costs the next start a compile, nothing more.
  absl::Status written = disk_->Write(key, DiskSuffix(), image);
  if (!written.ok()) spdlog::warn("kernel cache: not saved to disk: {}", written.ToString());
}

KernelCacheStats KernelCache::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gpucompute
