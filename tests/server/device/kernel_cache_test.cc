// Tests of the NVRTC kernel cache: key stability (no device needed), then compile, launch,
// memory and disk hits, rebuilds and compile errors on a real device.
#include "server/device/kernel_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

int DeviceArch(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
  return prop.major * 10 + prop.minor;
}

constexpr char kSaxpySource[] = R"(
#include "saxpy_scale.cuh"
extern "C" __global__ void saxpy(int n, SCALE_T a, const SCALE_T* x, SCALE_T* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = Scale(a, x[i]) + y[i];
}
)";

constexpr char kScaleHeader[] = R"(
#pragma once
template <typename T> __device__ T Scale(T a, T x) { return a * x; }
)";

KernelSpec SaxpySpec() {
  KernelSpec spec;
  spec.label = "saxpy<f32>";
  spec.program_name = "saxpy.cu";
  spec.source = kSaxpySource;
  spec.headers = {{"saxpy_scale.cuh", kScaleHeader}};
  spec.options = {"-DSCALE_T=float"};
  spec.kernel_name = "saxpy";
  return spec;
}

// A fresh directory per test, removed afterwards.
class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = absl::StrCat(::testing::TempDir(), "/kernel_cache_test_", getpid(), "_",
                        counter.fetch_add(1));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
};

// Runs y = a*x + y through `kernel` on n elements and checks it against the host.
void ExpectSaxpyWorks(cudaKernel_t kernel, int n) {
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i);
    y[i] = 3.0f - static_cast<float>(i);
  }
  const float a = 2.5f;
  float* dx = nullptr;
  float* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  void* args[] = {&n, const_cast<float*>(&a), &dx, &dy};
  const dim3 block(128);
  const dim3 grid((n + 127) / 128);
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, 0, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out(n);
  ASSERT_EQ(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(out[i], a * x[i] + y[i]) << "element " << i;
  }
  cudaFree(dx);
  cudaFree(dy);
}

// --- Without a device -----------------------------------------------------------------------

TEST_F(KernelCacheTest, KeyIsStableAndCoversEveryInput) {
  auto cache = KernelCache::Create(0, 90, "");
  ASSERT_TRUE(cache.ok()) << cache.status();
  const KernelSpec base = SaxpySpec();
  const std::string key = (*cache)->Key(base);
  EXPECT_THAT(key, MatchesRegex("[0-9a-f]{32}"));

  auto again = KernelCache::Create(0, 90, "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->Key(base), key);

  auto differs = [&](KernelSpec spec) { return (*cache)->Key(spec) != key; };
  KernelSpec s = base;
  s.source += " ";
  EXPECT_TRUE(differs(s));
  s = base;
  s.options = {"-DSCALE_T=double"};
  EXPECT_TRUE(differs(s));
  s = base;
  s.options.push_back("--use_fast_math");
  EXPECT_TRUE(differs(s));
  s = base;
  s.headers[0].second += "\n";
  EXPECT_TRUE(differs(s));
  s = base;
  s.headers[0].first = "other.cuh";
  EXPECT_TRUE(differs(s));
  s = base;
  s.kernel_name = "saxpy2";
  EXPECT_TRUE(differs(s));
  // Moving bytes between fields must change the key (fields are length-prefixed).
  s = base;
  s.options = {"-DSCALE_T=floa", "t"};
  EXPECT_TRUE(differs(s));
  // The label is a display name only.
  s = base;
  s.label = "another label";
  EXPECT_FALSE(differs(s));

  auto sm80 = KernelCache::Create(0, 80, "");
  ASSERT_TRUE(sm80.ok()) << sm80.status();
  EXPECT_NE((*sm80)->Key(base), key);
}

// The key names files shared across processes and restarts: pin it (for this NVRTC version)
// against a value computed independently with Python's hashlib over the same layout.
TEST_F(KernelCacheTest, KeyMatchesIndependentSha256) {
  if (KernelCache::NvrtcVersion() != "13.0") {
    GTEST_SKIP() << "golden key computed for NVRTC 13.0, have " << KernelCache::NvrtcVersion();
  }
  auto cache = KernelCache::Create(0, 90, "");
  ASSERT_TRUE(cache.ok()) << cache.status();
  KernelSpec spec;
  spec.label = "ignored";
  spec.program_name = "saxpy.cu";
  spec.kernel_name = "saxpy";
  spec.source = "extern \"C\" __global__ void saxpy() {}\n";
  spec.headers = {{"h.cuh", "#define X 1\n"}};
  spec.options = {"-DT=float"};
  EXPECT_EQ((*cache)->Key(spec), "5f1960587ce2f465240874d281cda550");
}

TEST_F(KernelCacheTest, PicksTargetNvrtcCanBuild) {
  auto sm90 = KernelCache::Create(0, 90, "");
  ASSERT_TRUE(sm90.ok()) << sm90.status();
  EXPECT_EQ((*sm90)->target(), "sm_90");
  // No sm_92 exists: CUBIN for sm_90 runs on it (binary compatible within a major).
  auto sm92 = KernelCache::Create(0, 92, "");
  ASSERT_TRUE(sm92.ok()) << sm92.status();
  EXPECT_EQ((*sm92)->target(), "sm_90");
  // Newer than NVRTC knows: PTX for the newest architecture it has, JIT-compiled on load.
  auto future = KernelCache::Create(0, 990, "");
  ASSERT_TRUE(future.ok()) << future.status();
  EXPECT_THAT((*future)->target(), MatchesRegex("compute_[0-9]+"));
  auto ancient = KernelCache::Create(0, 10, "");
  EXPECT_EQ(ancient.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(KernelCache::Create(0, 0, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KernelCacheTest, CreatesDirectoryAndReportsIt) {
  const std::string nested = dir_ + "/a/b";
  auto cache = KernelCache::Create(0, 90, nested);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  const KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.directory, nested);
  EXPECT_EQ(stats.entries, 0);
  EXPECT_EQ(stats.misses, 0);

  // A directory that cannot be used (a file, a relative path, one writable by others) is
  // not an error: the cache runs from memory and reports no directory.
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  const std::string open = dir_ + "/open";
  ASSERT_TRUE(std::filesystem::create_directory(open));
  std::filesystem::permissions(open, std::filesystem::perms::all);
  for (const std::string& bad : {file, std::string("relative/kc"), open}) {
    auto memory_only = KernelCache::Create(0, 90, bad);
    ASSERT_TRUE(memory_only.ok()) << bad << ": " << memory_only.status();
    EXPECT_EQ((*memory_only)->Stats().directory, "") << bad;
  }
  EXPECT_FALSE(std::filesystem::exists("relative"));
}

TEST_F(KernelCacheTest, RejectsBadSpecsBeforeTouchingTheDevice) {
  auto cache = KernelCache::Create(0, 90, "");
  ASSERT_TRUE(cache.ok()) << cache.status();
  KernelSpec spec = SaxpySpec();
  spec.options.push_back("-arch=sm_80");
  EXPECT_EQ((*cache)->Get(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = SaxpySpec();
  spec.kernel_name.clear();
  EXPECT_EQ((*cache)->Get(spec).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*cache)->Stats().misses, 0);
}

TEST(KernelCacheVersionTest, NvrtcVersionIsMajorDotMinor) {
  EXPECT_THAT(KernelCache::NvrtcVersion(), MatchesRegex("[0-9]+\\.[0-9]+"));
}

// --- On a device ----------------------------------------------------------------------------

TEST_F(KernelCacheTest, CompilesLaunchesAndHits) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto cache = KernelCache::Create(0, DeviceArch(0), dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const KernelSpec spec = SaxpySpec();

  auto kernel = (*cache)->Get(spec);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.disk_hits, 0);
  EXPECT_GT(stats.compile_ms_total, 0);
  EXPECT_THAT(stats.kernels, ElementsAre("saxpy<f32>"));
  const std::string key = (*cache)->Key(spec);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + key + ".cubin") ||
              std::filesystem::exists(dir_ + "/" + key + ".ptx"));

  for (int n : {1, 127, 1000, 4097}) ExpectSaxpyWorks(*kernel, n);

  auto second = (*cache)->Get(spec);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *kernel);
  stats = (*cache)->Stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.entries, 1);

  // A different variant is a different entry.
  KernelSpec f64 = spec;
  f64.label = "saxpy<f64>";
  f64.options = {"-DSCALE_T=double"};
  auto other = (*cache)->Get(f64);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, *kernel);
  stats = (*cache)->Stats();
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(stats.misses, 2);
}

TEST_F(KernelCacheTest, NewCacheLoadsFromDiskWithoutCompiling) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int arch = DeviceArch(0);
  {
    auto first = KernelCache::Create(0, arch, dir_);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Get(SaxpySpec()).ok());
  }
  auto cache = KernelCache::Create(0, arch, dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto kernel = (*cache)->Get(SaxpySpec());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.disk_hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.compile_ms_total, 0);
  EXPECT_EQ(stats.entries, 1);
  ExpectSaxpyWorks(*kernel, 300);
}

TEST_F(KernelCacheTest, CorruptDiskFileIsRebuiltAndReplaced) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto cache = KernelCache::Create(0, DeviceArch(0), dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const std::string key = (*cache)->Key(SaxpySpec());
  const std::string path =
      dir_ + "/" + key + ((*cache)->target().rfind("sm_", 0) == 0 ? ".cubin" : ".ptx");
  std::ofstream(path, std::ios::binary) << "not a cubin";

  auto kernel = (*cache)->Get(SaxpySpec());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.disk_hits, 0);
  EXPECT_GT(stats.compile_ms_total, 0);
  EXPECT_GT(std::filesystem::file_size(path), std::string("not a cubin").size());
  ExpectSaxpyWorks(*kernel, 64);
  // No temporaries are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 1);
}

TEST_F(KernelCacheTest, DiskFileFailingItsChecksIsNeverLoaded) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int arch = DeviceArch(0);
  std::string path;
  {
    auto first = KernelCache::Create(0, arch, dir_);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Get(SaxpySpec()).ok());
    path = dir_ + "/" + (*first)->Key(SaxpySpec()) +
           ((*first)->target().rfind("sm_", 0) == 0 ? ".cubin" : ".ptx");
  }
  // Flip one byte of the image: the checksum refuses the file, the kernel is compiled again
  // and the file rewritten, and the next cache loads the good copy.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), KernelCacheDir::kHeaderBytes);
  bytes[KernelCacheDir::kHeaderBytes + (bytes.size() - KernelCacheDir::kHeaderBytes) / 2] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  {
    auto cache = KernelCache::Create(0, arch, dir_);
    ASSERT_TRUE(cache.ok()) << cache.status();
    auto kernel = (*cache)->Get(SaxpySpec());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ((*cache)->Stats().disk_hits, 0);
    EXPECT_GT((*cache)->Stats().compile_ms_total, 0);
    ExpectSaxpyWorks(*kernel, 100);
  }
  auto cache = KernelCache::Create(0, arch, dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE((*cache)->Get(SaxpySpec()).ok());
  EXPECT_EQ((*cache)->Stats().disk_hits, 1);
}

TEST_F(KernelCacheTest, CompileErrorIsInternalWithNvrtcLog) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto cache = KernelCache::Create(0, DeviceArch(0), dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  KernelSpec spec = SaxpySpec();
  spec.label = "broken";
  spec.source = "extern \"C\" __global__ void saxpy(int n) { undeclared_thing = n }\n";
  auto kernel = (*cache)->Get(spec);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(kernel.status().message(), HasSubstr("undeclared_thing"));
  EXPECT_THAT(kernel.status().message(), HasSubstr("broken"));
  KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.entries, 0);
  EXPECT_THAT(stats.kernels, ::testing::IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  // A failure is not cached: the next Get tries again.
  EXPECT_FALSE((*cache)->Get(spec).ok());
  stats = (*cache)->Stats();
  EXPECT_EQ(stats.misses, 2);
}

TEST_F(KernelCacheTest, MissingKernelNameIsAnError) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto cache = KernelCache::Create(0, DeviceArch(0), "");
  ASSERT_TRUE(cache.ok()) << cache.status();
  KernelSpec spec = SaxpySpec();
  spec.kernel_name = "no_such_kernel";
  auto kernel = (*cache)->Get(spec);
  ASSERT_FALSE(kernel.ok());
  EXPECT_THAT(kernel.status().message(), HasSubstr("no_such_kernel"));
  EXPECT_EQ((*cache)->Stats().entries, 0);
}

TEST_F(KernelCacheTest, ConcurrentGetsOfOneKeyCompileOnce) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto cache = KernelCache::Create(0, DeviceArch(0), dir_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  constexpr int kThreads = 8;
  std::vector<cudaKernel_t> kernels(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto kernel = (*cache)->Get(SaxpySpec());
      if (kernel.ok()) kernels[t] = *kernel;
    });
  }
  for (std::thread& t : threads) t.join();
  for (cudaKernel_t k : kernels) EXPECT_EQ(k, kernels[0]);
  ASSERT_NE(kernels[0], nullptr);
  const KernelCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, kThreads - 1);
  EXPECT_EQ(stats.entries, 1);
  ExpectSaxpyWorks(kernels[0], 500);
}

}  // namespace
}  // namespace gpucompute
