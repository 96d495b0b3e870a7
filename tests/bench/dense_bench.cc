// Dense-layer benchmarks on the GPU: device time (CUDA events around the layers alone) of
// LayerNorm -> Linear -> GELU(tanh) at the peers' shapes (tests/../peers.py dense), with the L2
// flushed before every repetition by writing a 256 MiB buffer (as triton's do_bench does, which
// is how the peers are timed); median of many. Also the host-timed whole call (pack, copies,
// layers, copy back). JSON lines on stdout.
//
//   dense_bench [--quick] [--reps=N] [--only=LABEL_SUBSTRING] [--no-warmup] [--sweep]
// (--sweep: time the first 16 cuBLASLt heuristic algorithms at two shapes; --no-warmup: for
// ncu, so that the first launches are the benchmark's.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/element_type.h"
#include "server/ops/dense/cuda_dense.h"
#include "server/device/cuda_resources.h"
#include "server/device/device_context.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace gpucompute::dense {
namespace {

using Clock = std::chrono::steady_clock;

void Die(const absl::Status& s) {
  std::fprintf(stderr, "dense_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int g_cluster = 0;  // --cluster=N: the tensor-core kernel's CTAs per cluster (0: default)

struct Case {
  std::string name;
  ElementType dtype;
  bool tf32;
  int64_t rows;
  std::vector<int64_t> dims;  // in, out1, out2, ...: one LN -> Linear -> GELU(tanh) layer each
  DensePath path = DensePath::kAuto;
  bool flush = true;  // false: weights stay in L2 between repetitions (a hot, small model)
  bool ln = true;
};

const char* DtypeLabel(ElementType t, bool tf32) {
  switch (t) {
    case ElementType::kFloat16: return "fp16";
    case ElementType::kBFloat16: return "bf16";
    default: return tf32 ? "tf32" : "fp32";
  }
}

const char* PathLabel(DensePath p) {
  switch (p) {
    case DensePath::kFewRows: return "few_rows";
    case DensePath::kGemm: return "gemm";
    case DensePath::kTensorCore: return "tensor_core";
    default: return "auto";
  }
}

ModelSpec MakeSpec(const Case& c) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g(0.f, 1.f);
  ModelSpec spec;
  spec.name = c.name;
  spec.dtype = c.dtype;
  spec.allow_tf32 = c.tf32;
  for (size_t l = 0; l + 1 < c.dims.size(); ++l) {
    LayerSpec L;
    L.in = c.dims[l];
    L.out = c.dims[l + 1];
    L.layernorm = c.ln;
    L.activation = Activation::kGeluTanh;
    L.weight.resize(static_cast<size_t>(L.in * L.out));
    const float scale = 1.f / std::sqrt(static_cast<float>(L.in));
    // Random weights (never zeros: they can run faster than real data).
    for (float& w : L.weight) w = g(rng) * scale;
    L.bias.resize(static_cast<size_t>(L.out));
    for (double& b : L.bias) b = 0.1 * g(rng);
    spec.layers.push_back(std::move(L));
  }
  return spec;
}

std::string Label(const Case& c) {
  std::string dims;
  for (size_t i = 0; i < c.dims.size(); ++i) dims += absl::StrFormat("%s%d", i ? "x" : "", c.dims[i]);
  return absl::StrFormat("%s/%s/rows%d/%s/%s/%s%s", c.name, dims, c.rows, DtypeLabel(c.dtype, c.tf32),
                         PathLabel(c.path), c.flush ? "flush" : "hot", c.ln ? "" : "/noln");
}

void Run(DeviceContext& dev, void* flush, size_t flush_bytes, const Case& c, int reps) {
  ModelSpec spec = MakeSpec(c);
  auto loaded = LoadModelOnDevices({&dev}, spec);
  if (!loaded.ok()) Die(loaded.status());
  // Input in the model's dtype, as the peers feed it.
  const ElementType input = c.dtype;
  std::mt19937_64 rng(2);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(c.rows * c.dims.front()));
  for (float& v : x) v = g(rng);
  std::string bytes(x.size() * ElementSize(input), '\0');
  FromFloat(x.data(), static_cast<int64_t>(x.size()), input, bytes.data());
  x.clear();
  x.shrink_to_fit();
  auto request = std::make_shared<Request>();
  request->model = *loaded;
  request->input_dtype = input;
  request->rows = c.rows;
  request->input = bytes;
  Batch batch;
  batch.model = *loaded;
  batch.input_dtype = input;
  batch.requests.push_back(request);

  auto before = CudaEvent::Create();
  auto after = CudaEvent::Create();
  if (!before.ok() || !after.ok()) Die(before.status());
  EnqueueOptions options;
  options.before = before->get();
  options.after = after->get();
  options.path = c.path;
  options.tensor_core_cluster = g_cluster;
  StreamSlot* slot = dev.AcquireSlot();
  const cudaStream_t stream = slot->stream.get();
  std::vector<double> device_us, total_us;
  struct Flush {
    void* p;
    size_t bytes;
    int value;
  } flush_arg{flush, flush_bytes, 0};
  if (c.flush) {
    options.before_layers = [](cudaStream_t s, void* arg) {
      auto* f = static_cast<Flush*>(arg);
      cudaMemsetAsync(f->p, f->value++ & 0xff, f->bytes, s);
    };
    options.before_layers_arg = &flush_arg;
  }
  EnqueueOptions untimed;
  untimed.path = c.path;

  for (int r = 0; r < reps + 3; ++r) {
    // Device time: the flush (evicting the weights from L2) is queued after the copy in, just
    // ahead of the layers (options.before_layers), so the layers start behind it and the events
    // time the device, not the host's launches or the copy engine's hand-over.
    auto pending = EnqueueDense(dev, *slot, batch, &options);
    if (!pending.ok() && r == 0 && absl::IsInvalidArgument(pending.status())) {
      // A forced path that cannot take this shape (e.g. two rows of k = 16384 on the few-rows
      // kernel): a line that says so, and on to the next case.
      dev.ReleaseSlot(slot);
      std::string reason(pending.status().message());
      std::replace(reason.begin(), reason.end(), '"', '\'');
      std::printf("%s\n", absl::StrFormat(R"({"what":"dense skipped","case":"%s","reason":"%s"})",
                                          Label(c), reason).c_str());
      return;
    }
    if (!pending.ok()) Die(pending.status());
    cudaError_t err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) Die(CudaErrorStatus(err, "bench", __FILE__, __LINE__));
    float ms = 0;
    cudaEventElapsedTime(&ms, before->get(), after->get());
    // The whole call (pack, copy in, layers, copy out), host-timed after a flush.
    cudaMemsetAsync(flush, (r + 1) & 0xff, flush_bytes, stream);
    cudaStreamSynchronize(stream);
    const auto t0 = Clock::now();
    pending = EnqueueDense(dev, *slot, batch, &untimed);
    if (!pending.ok()) Die(pending.status());
    err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) Die(CudaErrorStatus(err, "bench", __FILE__, __LINE__));
    const double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (r >= 3) {
      device_us.push_back(ms * 1e3);
      total_us.push_back(wall);
    }
  }
  dev.ReleaseSlot(slot);

  double flops = 0, weight_bytes = 0;
  const int elem = ElementSize(c.dtype);
  for (size_t l = 0; l + 1 < c.dims.size(); ++l) {
    flops += 2.0 * c.rows * c.dims[l] * c.dims[l + 1];
    weight_bytes += static_cast<double>(c.dims[l]) * c.dims[l + 1] * elem;
  }
  const double io_bytes = static_cast<double>(c.rows) * (c.dims.front() + c.dims.back()) * elem;
  // Ceilings measured on the H200: 4.25 TB/s copy; 777 TFLOP/s bf16/fp16,
  // 51 fp32; tf32 taken as half of bf16.
  const double rate = c.dtype != ElementType::kFloat32 ? 777e12 : (c.tf32 ? 388e12 : 51e12);
  const double floor_us = std::max(flops / rate, (weight_bytes + io_bytes) / 4.25e12) * 1e6;
  const double med = Median(device_us);
  std::string dims;
  for (size_t i = 0; i < c.dims.size(); ++i) dims += absl::StrFormat("%s%d", i ? "," : "", c.dims[i]);
  std::printf(
      "%s\n",
      absl::StrFormat(
          R"({"what":"dense %s","case":"%s","rows":%d,"dims":[%s],"layers":%d,"dtype":"%s","path":"%s","ln":%s,"l2_flush":%s,"device_us":%.2f,"device_us_min":%.2f,"total_us":%.1f,"tflops":%.1f,"gbps":%.0f,"floor_us":%.2f,"reps":%d})",
          c.name, Label(c), c.rows, dims, static_cast<int>(c.dims.size() - 1), DtypeLabel(c.dtype, c.tf32),
          PathLabel(c.path), c.ln ? "true" : "false", c.flush ? "true" : "false", med, *std::min_element(device_us.begin(), device_us.end()),
          Median(total_us), flops / med * 1e-6, (weight_bytes + io_bytes) / med * 1e-3, floor_us,
          reps)
          .c_str());
  std::fflush(stdout);
}

// Calibration: a device-to-device copy of `bytes` after the same flush, timed the same way
// (what reading the weights once costs under this method, dirty L2 lines included).
void Calibrate(DeviceContext& dev, void* flush, size_t flush_bytes, size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemset(a, 1, bytes);
  auto e0 = CudaEvent::Create();
  auto e1 = CudaEvent::Create();
  StreamSlot* slot = dev.AcquireSlot();
  const cudaStream_t stream = slot->stream.get();
  for (bool fl : {true, false}) {
    std::vector<double> us;
    for (int r = 0; r < reps + 3; ++r) {
      if (fl) cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream);
      cudaEventRecord(e0->get(), stream);
      cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
      cudaEventRecord(e1->get(), stream);
      cudaStreamSynchronize(stream);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0->get(), e1->get());
      if (r >= 3) us.push_back(ms * 1e3);
    }
    std::printf("%s\n", absl::StrFormat(R"({"what":"calibration d2d copy","bytes":%d,"l2_flush":%s,"device_us":%.2f})",
                                        bytes, fl ? "true" : "false", Median(us)).c_str());
  }
  dev.ReleaseSlot(slot);
  cudaFree(a);
  cudaFree(b);
}

// The cuBLASLt heuristic's first 16 algorithms for one product, each timed (flushed L2):
// does the first choice leave time on the table?
void SweepGemm(DeviceContext& dev, void* flush, size_t flush_bytes, int64_t rows, int64_t k,
               int64_t n, cublasLtEpilogue_t epilogue, const char* label, int reps) {
  const cudaDataType_t dt = CUDA_R_16BF;
  std::vector<uint16_t> host(static_cast<size_t>(std::max(k * n, rows * k)));
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.f, 1.f);
  for (auto& h : host) h = FloatToBFloat16(g(rng) * 0.03f);
  void *A, *B, *D, *bias;
  cudaMalloc(&A, k * n * 2);
  cudaMalloc(&B, rows * k * 2);
  cudaMalloc(&D, rows * n * 2);
  cudaMalloc(&bias, n * 2);
  cudaMemcpy(A, host.data(), k * n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(B, host.data(), rows * k * 2, cudaMemcpyHostToDevice);
  cudaMemset(bias, 0, n * 2);
  StreamSlot* slot = dev.AcquireSlot();
  const cudaStream_t stream = slot->stream.get();
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, dt, n, k, n);
  cublasLtMatrixLayoutCreate(&lb, dt, k, rows, k);
  cublasLtMatrixLayoutCreate(&ld, dt, n, rows, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  const uint64_t ws = kCublasLtWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(slot->cublaslt.get(), desc, la, lb, ld, ld, pref, 16, results, &found);
  auto e0 = CudaEvent::Create();
  auto e1 = CudaEvent::Create();
  const float one = 1.f, zero = 0.f;
  std::string times;
  double first = 0, best = 1e30;
  int best_i = -1;
  for (int i = 0; i < found; ++i) {
    std::vector<double> us;
    bool ok = true;
    for (int r = 0; r < reps + 2 && ok; ++r) {
      cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream);
      cudaEventRecord(e0->get(), stream);
      ok = cublasLtMatmul(slot->cublaslt.get(), desc, &one, A, la, B, lb, &zero, D, ld, D, ld,
                          &results[i].algo, slot->cublaslt_workspace.get(), ws, stream) ==
           CUBLAS_STATUS_SUCCESS;
      cudaEventRecord(e1->get(), stream);
      cudaStreamSynchronize(stream);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0->get(), e1->get());
      if (r >= 2) us.push_back(ms * 1e3);
    }
    if (!ok) continue;
    const double m = Median(us);
    if (i == 0) first = m;
    if (m < best) best = m, best_i = i;
    times += absl::StrFormat("%s%.2f", times.empty() ? "" : ",", m);
  }
  std::printf("%s\n", absl::StrFormat(R"({"what":"gemm sweep","rows":%d,"k":%d,"n":%d,"dtype":"bf16","epilogue":"%s","found":%d,"first_us":%.2f,"best_us":%.2f,"best_index":%d,"all_us":[%s]})",
                                      rows, k, n, label, found, first, best, best_i, times).c_str());
  std::fflush(stdout);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  dev.ReleaseSlot(slot);
  cudaFree(A);
  cudaFree(B);
  cudaFree(D);
  cudaFree(bias);
}

}  // namespace
}  // namespace gpucompute::dense

int main(int argc, char** argv) {
  using namespace gpucompute;
  using namespace gpucompute::dense;
  bool quick = false, warm = true, sweep = false;
  std::string only;
  int reps_override = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    if (a == "--no-warmup") warm = false;  // for ncu: the first launches are the benchmark's
    if (a == "--sweep") sweep = true;
    if (a.rfind("--only=", 0) == 0) only = a.substr(7);  // substring of a case's label
    if (a.rfind("--reps=", 0) == 0) reps_override = std::atoi(a.c_str() + 7);
    if (a.rfind("--cluster=", 0) == 0) g_cluster = std::atoi(a.c_str() + 10);
  }
  spdlog::set_default_logger(spdlog::stderr_logger_mt("stderr"));  // stdout is JSON lines
  DeviceContext::Options o;
  o.streams = 1;
  auto dev = DeviceContext::Create(o);
  if (!dev.ok()) Die(dev.status());
  if (warm) {
    if (auto s = WarmUpDense(**dev); !s.ok()) Die(s);
  }
  const size_t flush_bytes = size_t{256} << 20;
  void* flush = nullptr;
  if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) Die(absl::InternalError("cudaMalloc flush"));

  const ElementType bf16 = ElementType::kBFloat16, fp16 = ElementType::kFloat16,
                    fp32 = ElementType::kFloat32;
  const int reps = reps_override > 0 ? reps_override : quick ? 20 : 100;
  std::vector<Case> cases = {
      {"ln_linear_gelu", bf16, false, 1024, {1024, 4096}},
      {"ln_linear_gelu", fp16, false, 1024, {1024, 4096}},
      {"ln_linear_gelu", fp32, false, 1024, {1024, 4096}},
      {"ln_linear_gelu", fp32, true, 1024, {1024, 4096}},
      {"ln_linear_gelu", bf16, false, 1, {1024, 4096}},
      {"ln_linear_gelu", fp16, false, 1, {1024, 4096}},
      {"ln_linear_gelu", fp32, false, 1, {1024, 4096}},
      {"ln_linear_gelu", bf16, false, 1, {1024, 4096}, DensePath::kGemm},
      {"ln_linear_gelu", bf16, false, 8, {1024, 4096}},
      {"ln_linear_gelu", bf16, false, 8, {1024, 4096}, DensePath::kGemm},
      {"ln_linear_gelu", bf16, false, 16, {1024, 4096}},
      {"ln_linear_gelu", bf16, false, 16384, {4096, 16384}},
      {"stack4", bf16, false, 1024, {1024, 4096, 1024, 4096, 1024}},
      {"stack4", bf16, false, 1, {1024, 4096, 1024, 4096, 1024}},
  };
  // Diagnostics: the same shapes with the weights left in L2, and without LayerNorm (no
  // normalisation kernel in front of cuBLASLt).
  Case hot1{"ln_linear_gelu", bf16, false, 1, {1024, 4096}};
  hot1.flush = false;
  Case hot8 = hot1;
  hot8.rows = 8;
  Case hot1024 = hot1;
  hot1024.rows = 1024;
  Case noln1024{"linear_gelu", bf16, false, 1024, {1024, 4096}};
  noln1024.ln = false;
  Case noln1{"linear_gelu", bf16, false, 1, {1024, 4096}};
  noln1.ln = false;
  cases.insert(cases.end(), {hot1, hot8, hot1024, noln1024, noln1});
  // Where the few-rows kernel stops paying: both paths at 2..6 rows, and a layer with few
  // column tiles (4096 -> 1024).
  for (int64_t rows : {2, 3, 4}) {
    for (DensePath p : {DensePath::kFewRows, DensePath::kGemm}) {
      cases.push_back(Case{"ln_linear_gelu", bf16, false, rows, {1024, 4096}, p});
    }
  }
  // The tensor-core kernel against cuBLASLt on the many-row shapes.
  for (DensePath p : {DensePath::kGemm, DensePath::kTensorCore}) {
    cases.push_back(Case{"ln_linear_gelu", bf16, false, 1024, {1024, 4096}, p});
    cases.push_back(Case{"ln_linear_gelu", fp16, false, 1024, {1024, 4096}, p});
    cases.push_back(Case{"ln_linear_gelu", bf16, false, 16384, {4096, 16384}, p});
    cases.push_back(Case{"stack4", bf16, false, 1024, {1024, 4096, 1024, 4096, 1024}, p});
    cases.push_back(Case{"ln_linear_gelu", bf16, false, 64, {1024, 4096}, p});
    cases.push_back(Case{"ln_linear_gelu", bf16, false, 256, {1024, 4096}, p});
    Case noln{"linear_gelu", bf16, false, 1024, {1024, 4096}, p};
    noln.ln = false;
    cases.push_back(noln);
  }
  for (DensePath p : {DensePath::kFewRows, DensePath::kGemm}) {
    cases.push_back(Case{"ln_linear_gelu", bf16, false, 1, {4096, 1024}, p});
    cases.push_back(Case{"stack4", bf16, false, 1, {1024, 4096, 1024, 4096, 1024}, p});
  }
  // Where the few-rows kernel stops paying by layer size: one and two rows through 16 MiB to
  // 512 MiB of weights (the unbatched passes of dense_server_bench's and load_dense_gpu.sh's
  // big models), all bound by reading W.
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{
           {2048, 4096}, {4096, 4096}, {4096, 8192}, {8192, 4096}, {4096, 16384}, {16384, 4096},
           {16384, 16384}}) {
    for (int64_t rows : {1, 2}) {
      for (DensePath p : {DensePath::kFewRows, DensePath::kGemm}) {
        cases.push_back(Case{"ln_linear_gelu", bf16, false, rows, dims, p});
      }
    }
  }

  for (const Case& c : cases) {
    if (!only.empty() && Label(c).find(only) == std::string::npos) continue;
    const int r = c.rows * c.dims.front() >= (int64_t{1} << 26) ? std::min(reps, 20) : reps;
    Run(**dev, flush, flush_bytes, c, r);
  }
  if (only.empty()) Calibrate(**dev, flush, flush_bytes, size_t{8} << 20, reps);
  if (sweep) {
    SweepGemm(**dev, flush, flush_bytes, 1024, 1024, 4096, CUBLASLT_EPILOGUE_DEFAULT, "default", 20);
    SweepGemm(**dev, flush, flush_bytes, 1024, 1024, 4096, CUBLASLT_EPILOGUE_GELU_BIAS, "gelu_bias", 20);
    SweepGemm(**dev, flush, flush_bytes, 16384, 4096, 16384, CUBLASLT_EPILOGUE_GELU_BIAS, "gelu_bias", 5);
  }
  cudaFree(flush);
  return 0;
}
