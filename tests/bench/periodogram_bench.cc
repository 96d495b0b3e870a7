// Periodogram benchmarks on the GPU: kernel device time (CUDA events) for the peers' problem
// (1,024 samples x 1,048,576 frequencies) per dtype and kernel shape, a mixed-length batch,
// and end-to-end through a server on loopback (with first-request latency). JSON lines out.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/ops/periodogram/nufft.h"
#include "server/device/cuda_resources.h"
#include "server/device/cufft.h"
#include "server/device/fft_plans.h"
#include "server/device/device_context.h"
#include "server/server.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Die(const absl::Status& s) {
  std::fprintf(stderr, "bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

// The peers' problem: sorted uniform times on [0, 10], a 1.3 Hz sinusoid plus noise.
periodogram::SeriesSpec PeerSeries(int nx, int64_t nf) {
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> u(0, 10);
  std::normal_distribution<double> g(0, 1);
  periodogram::SeriesSpec s;
  for (int i = 0; i < nx; ++i) s.t.push_back(u(rng));
  std::sort(s.t.begin(), s.t.end());
  for (double t : s.t) s.y.push_back(std::sin(2 * M_PI * 1.3 * t) + 0.1 * g(rng));
  s.grid.uniform = periodogram::UniformGrid{0.01, (100.0 - 0.01) / (nf - 1), nf};
  return s;
}

std::shared_ptr<periodogram::Request> MixedBatch(ElementType dtype, int count, int64_t nf) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> len(200, 2000);
  std::uniform_real_distribution<double> u(0, 1);
  auto r = std::make_shared<periodogram::Request>();
  r->dtype = dtype;
  for (int i = 0; i < count; ++i) {
    periodogram::SeriesSpec s;
    const int n = len(rng);
    const double f = 0.5 + 20 * u(rng), baseline = 50 + 500 * u(rng);
    for (int k = 0; k < n; ++k) s.t.push_back(baseline * u(rng));
    std::sort(s.t.begin(), s.t.end());
    for (double t : s.t) s.y.push_back(std::sin(2 * M_PI * f * t) + 0.5 * (u(rng) - 0.5));
    s.grid.uniform = periodogram::UniformGrid{0.01, 25.0 / nf, nf};
    r->series.push_back(std::move(s));
  }
  return r;
}

struct DeviceTimes {
  double kernel_ms;  // median device time of every compute launch (kernels, FFTs, peaks)
  double total_ms;   // median pack + copies + compute + copy back, host clock
  double kernel_min_ms = 0;
};

DeviceTimes TimeOnDevice(DeviceContext& dev, std::shared_ptr<periodogram::Request> request,
                         const periodogram::CudaKernelShape* shape, int reps,
                         std::vector<periodogram::SeriesPower>* results,
                         periodogram::ProductForm product = periodogram::ProductForm::kAuto) {
  auto batch = std::make_shared<periodogram::Batch>();
  batch->dtype = request->dtype;
  batch->requests.push_back(request);
  auto before = CudaEvent::Create();
  auto after = CudaEvent::Create();
  if (!before.ok() || !after.ok()) Die(before.status());
  periodogram::EnqueueOptions opts{before->get(), after->get()};
  opts.plan.shape = shape;
  opts.plan.product = product;
  StreamSlot* slot = dev.AcquireSlot();
  std::vector<double> kernel, total;
  for (int r = 0; r < reps + 3; ++r) {
    const auto t0 = Clock::now();
    auto pending = periodogram::EnqueuePeriodogram(dev, *slot, *batch, &opts);
    if (!pending.ok()) Die(pending.status());
    cudaStreamSynchronize(slot->stream.get());
    const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    // The first call of a (size, batch) hands it to the FFT planner: time the steady state.
    if (r == 0 && slot->ffts != nullptr) slot->ffts->WaitForPlanner();
    float ms = 0;
    cudaEventElapsedTime(&ms, before->get(), after->get());
    if (r >= 3) {
      kernel.push_back(ms);
      total.push_back(wall);
    }
    if (r == reps + 2 && results) *results = periodogram::UnpackPeriodogram(*pending, *slot, *batch);
  }
  dev.ReleaseSlot(slot);
  return {Median(kernel), Median(total), *std::min_element(kernel.begin(), kernel.end())};
}

// Max |gpu - cpu float64| over every 97th frequency (the CPU reference is slow at 1M).
double MaxErrorVsCpu(const periodogram::SeriesSpec& s, ElementType dtype,
                     const periodogram::SeriesPower& got) {
  periodogram::SeriesSpec sub = s;
  sub.method = periodogram::Method::kDirect;
  sub.grid = periodogram::Grid{};
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < s.grid.size(); k += 97) idx.push_back(k);
  for (int64_t k : idx) sub.grid.explicit_frequencies.push_back(s.grid.frequency(k));
  const auto ref = periodogram::ComputeSeriesCpu(sub, ElementType::kFloat64);
  const double* r = reinterpret_cast<const double*>(ref.power.data());
  double err = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    const double v = dtype == ElementType::kFloat32
                         ? reinterpret_cast<const float*>(got.power.data())[idx[i]]
                         : reinterpret_cast<const double*>(got.power.data())[idx[i]];
    err = std::max(err, std::abs(v - r[i]));
    if (std::isnan(v)) return NAN;
  }
  return err;
}

v1::PeriodogramRequest ToProto(const periodogram::Request& r) {
  v1::PeriodogramRequest req;
  req.set_dtype(r.dtype == ElementType::kFloat32 ? v1::FLOAT32 : v1::FLOAT64);
  for (const auto& s : r.series) {
    auto* out = req.add_series();
    auto vec = [](const std::vector<double>& v, v1::Tensor* t) {
      EncodeVector(v1::FLOAT64, static_cast<int64_t>(v.size()),
                   std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8), t);
    };
    vec(s.t, out->mutable_t());
    vec(s.y, out->mutable_y());
    if (s.grid.uniform) {
      auto* u = out->mutable_frequency()->mutable_uniform();
      u->set_f0(s.grid.uniform->f0);
      u->set_df(s.grid.uniform->df);
      u->set_n(s.grid.uniform->n);
    }
  }
  return req;
}

double CallMs(v1::Compute::Stub& stub, const v1::PeriodogramRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::PeriodogramResponse resp;
  const auto t0 = Clock::now();
  const grpc::Status s = stub.Periodogram(&ctx, req, &resp);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!s.ok()) Die(absl::InternalError(s.error_message()));
  return ms;
}

void Emit(const std::string& json) { std::printf("%s\n", json.c_str()); std::fflush(stdout); }

// A JSON number, or null where there is none (NaN: an error over a power with NaN bins).
std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.3g", v) : "null"; }

// The direct method on the peers' problem, per dtype: as the server runs it (matrix products,
// kernels/lombscargle_product.cuh) and by the NVRTC kernel alone (its automatic shape).
void BenchDirect(DeviceContext& dev, int reps) {
  const int nx = 1024;
  const int64_t nf = int64_t{1} << 20;
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    for (periodogram::ProductForm product :
         {periodogram::ProductForm::kAuto, periodogram::ProductForm::kNever}) {
      auto req = std::make_shared<periodogram::Request>();
      req->dtype = dtype;
      req->series.push_back(PeerSeries(nx, nf));
      std::vector<periodogram::SeriesPower> out;
      const DeviceTimes t = TimeOnDevice(dev, req, nullptr, reps, &out, product);
      const double err = MaxErrorVsCpu(req->series[0], dtype, out[0]);
      Emit(absl::StrFormat(
          R"({"what":"lombscargle direct","form":"%s","nx":%d,"nf":%d,"dtype":"%s","device_ms":%.4f,"device_min_ms":%.4f,"pipeline_ms":%.3f,"peak_frequency":%.5f,"max_abs_err_vs_cpu_direct_f64":%s})",
          product == periodogram::ProductForm::kNever ? "nvrtc kernel" : "products", nx, nf, ElementName(dtype),
          t.kernel_ms, t.kernel_min_ms, t.total_ms, out[0].peak_frequency, JsonNumber(err)));
    }
  }
}

// The fast method on the peers' problem, per dtype and nterms: device time of the whole
// compute (spread, FFT, power, peaks), the pipeline, and the error against direct sums.
void BenchFast(DeviceContext& dev, int reps) {
  const int nx = 1024;
  const int64_t nf = int64_t{1} << 20;
  for (int nterms : {1, 2}) {
    for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
      auto req = std::make_shared<periodogram::Request>();
      req->dtype = dtype;
      req->series.push_back(PeerSeries(nx, nf));
      req->series[0].method = periodogram::Method::kFast;
      req->series[0].nterms = nterms;
      std::vector<periodogram::SeriesPower> out;
      const DeviceTimes t = TimeOnDevice(dev, req, nullptr, reps, &out);
      const double err = MaxErrorVsCpu(req->series[0], dtype, out[0]);
      Emit(absl::StrFormat(
          R"({"what":"lombscargle fast","nx":%d,"nf":%d,"nterms":%d,"dtype":"%s","device_ms":%.4f,"device_min_ms":%.4f,"pipeline_ms":%.3f,"peak_frequency":%.5f,"max_abs_err_vs_cpu_direct_f64":%s})",
          nx, nf, nterms, ElementName(dtype), t.kernel_ms, t.kernel_min_ms, t.total_ms,
          out[0].peak_frequency, JsonNumber(err)));
    }
  }
}

// The fast method's stages alone, for its cost breakdown: zeroing the fine grids and the
// batched inverse FFT over them, on a buffer of the same size (median of `reps`, CUDA events),
// on a stream slot's plans (the exact plan for the batch, which the planner builds after the
// first call), on `batched` (plans for batches 1, 16, 256, ... only) and on a plan of the
// benchmark's own for exactly this batch, executed directly (outside FftPlans).
// fft_size: M (the full grid) or a window L dividing M (M / L transforms per grid).
void BenchFastStages(DeviceContext& dev, FftPlans& batched, ElementType dtype, int64_t nf,
                     int transforms, int64_t fft_size, int reps) {
  const periodogram::NufftPlan plan = periodogram::MakeNufftPlan(nf, dtype, 1);
  const int64_t batch = transforms * (plan.grid_size / fft_size);
  const size_t bytes = static_cast<size_t>(plan.grid_size) * transforms * 2 * ElementSize(dtype);
  void* grid = nullptr;
  if (cudaMalloc(&grid, bytes) != cudaSuccess) Die(absl::InternalError("cudaMalloc"));
  auto e0 = CudaEvent::Create();
  auto e1 = CudaEvent::Create();
  auto e2 = CudaEvent::Create();
  auto e3 = CudaEvent::Create();
  auto e4 = CudaEvent::Create();
  const cudaStream_t stream = nullptr;
  auto own = CufftPlan::Create1d(fft_size, batch, dtype == ElementType::kFloat32 ? CUFFT_C2C : CUFFT_Z2Z);
  if (!own.ok()) Die(own.status());
  void* work = nullptr;
  if (cudaMalloc(&work, std::max<size_t>(own->work_bytes(), 1)) != cudaSuccess) Die(absl::InternalError("cudaMalloc"));
  if (cufftSetWorkArea(own->get(), work) != CUFFT_SUCCESS) Die(absl::InternalError("cufftSetWorkArea"));
  std::vector<double> memset_ms, fft_ms, batched_ms, own_ms;
  StreamSlot* slot = dev.AcquireSlot();
  FftPlans& plans = *slot->ffts;
  for (int r = 0; r < reps + 3; ++r) {
    cudaEventRecord(e0->get(), stream);
    cudaMemsetAsync(grid, 0, bytes, stream);
    cudaEventRecord(e1->get(), stream);
    if (absl::Status s = plans.Inverse(dtype, fft_size, batch, grid, stream, dev.memory_pool()); !s.ok()) Die(s);
    cudaEventRecord(e2->get(), stream);
    if (absl::Status s = batched.Inverse(dtype, fft_size, batch, grid, stream, dev.memory_pool()); !s.ok()) Die(s);
    cudaEventRecord(e3->get(), stream);
    if (dtype == ElementType::kFloat32) {
      auto* d = static_cast<cufftComplex*>(grid);
      cufftExecC2C(own->get(), d, d, CUFFT_INVERSE);
    } else {
      auto* d = static_cast<cufftDoubleComplex*>(grid);
      cufftExecZ2Z(own->get(), d, d, CUFFT_INVERSE);
    }
    cudaEventRecord(e4->get(), stream);
    cudaEventSynchronize(e4->get());
    if (r == 0) plans.WaitForPlanner();
    float a = 0, b = 0, c = 0, d = 0;
    cudaEventElapsedTime(&a, e0->get(), e1->get());
    cudaEventElapsedTime(&b, e1->get(), e2->get());
    cudaEventElapsedTime(&c, e2->get(), e3->get());
    cudaEventElapsedTime(&d, e3->get(), e4->get());
    if (r >= 3) {
      memset_ms.push_back(a);
      fft_ms.push_back(b);
      batched_ms.push_back(c);
      own_ms.push_back(d);
    }
  }
  dev.ReleaseSlot(slot);
  cudaFree(work);
  cudaFree(grid);
  Emit(absl::StrFormat(
      R"({"what":"lombscargle fast stages","nf":%d,"dtype":"%s","grid_size":%d,"transforms":%d,"fft_size":%d,"fft_batch":%d,"grid_mb":%.1f,"memset_ms":%.4f,"memset_gb_per_s":%.0f,"fft_ms":%.4f,"fft_batched_plans_ms":%.4f,"fft_own_plan_ms":%.4f})",
      nf, ElementName(dtype), plan.grid_size, transforms, fft_size, batch, bytes / 1e6, Median(memset_ms),
      bytes / Median(memset_ms) / 1e6, Median(fft_ms), Median(batched_ms), Median(own_ms)));
}

// The first transforms of sizes no other row uses, against the next ones on the same plans:
// what a request that is the first of its size in the process pays beyond (cuFFT's kernels
// loaded on their first launch), host clock around the call and its completion.
void BenchFirstExecutions(DeviceContext& dev) {
  StreamSlot* slot = dev.AcquireSlot();
  const cudaStream_t stream = slot->stream.get();
  for (const auto& [size, batch] : {std::pair<int64_t, int64_t>{45 * 4096, 3}, {27 * 256, 40}}) {
    for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
      const size_t bytes = static_cast<size_t>(size * batch) * 2 * ElementSize(dtype);
      void* grid = nullptr;
      if (cudaMalloc(&grid, bytes) != cudaSuccess) Die(absl::InternalError("cudaMalloc"));
      cudaMemset(grid, 0, bytes);
      double ms[3];
      for (double& m : ms) {
        const auto t0 = Clock::now();
        if (absl::Status s = slot->ffts->Inverse(dtype, size, batch, grid, stream, dev.memory_pool()); !s.ok()) Die(s);
        cudaStreamSynchronize(stream);
        m = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
      cudaFree(grid);
      Emit(absl::StrFormat(
          R"({"what":"fft first executions","dtype":"%s","fft_size":%d,"fft_batch":%d,"first_ms":%.3f,"second_ms":%.3f,"third_ms":%.3f})",
          ElementName(dtype), size, batch, ms[0], ms[1], ms[2]));
    }
  }
  dev.ReleaseSlot(slot);
}

// Making a stream slot's FFT plans for the server's default limit, with cuFFT's kernels already
// in the driver's JIT cache (the context above made them first): time and device memory.
std::unique_ptr<FftPlans> BenchFftPlans(int device, int64_t max_size) {
  size_t free0 = 0, free1 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  const auto t0 = Clock::now();
  auto plans = FftPlans::Create(device, max_size, /*max_exact_plans=*/0);
  if (!plans.ok()) Die(plans.status());
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  cudaMemGetInfo(&free1, &total);
  Emit(absl::StrFormat(R"({"what":"fft plans","max_size":%d,"batched_plans":%d,"ms":%.1f,"device_mib":%.1f})",
                       max_size, (*plans)->counts().batched_plans, ms,
                       (static_cast<double>(free0) - static_cast<double>(free1)) / (1 << 20)));
  return *std::move(plans);
}

int Main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const bool fast_only = argc > 1 && std::string(argv[1]) == "--fast";
  const bool direct_only = argc > 1 && std::string(argv[1]) == "--direct";
  const int reps = quick ? 5 : 30;
  const int nx = 1024;
  const int64_t nf = int64_t{1} << 20;

  DeviceContext::Options o;
  o.fft_max_size = periodogram::LargestFftSize(int64_t{1} << 26);  // the server's default limit
  const auto t0 = Clock::now();
  auto dev = DeviceContext::Create(o);
  if (!dev.ok()) Die(dev.status());
  const double context_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Emit(absl::StrFormat(R"({"what":"device","name":"%s","sms":%d,"sm":%d,"context_ms":%.0f})",
                       (*dev)->description().name, (*dev)->description().multiprocessors,
                       (*dev)->arch(), context_ms));
  if (!fast_only) BenchDirect(**dev, quick ? 5 : 30);
  if (direct_only) return 0;
  BenchFast(**dev, quick ? 5 : 30);
  BenchFirstExecutions(**dev);
  const std::unique_ptr<FftPlans> batched = BenchFftPlans((*dev)->device(), o.fft_max_size);
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    const int64_t m = periodogram::MakeNufftPlan(nf, dtype, 1).grid_size;
    for (int64_t size : {m, int64_t{4096}}) {
      BenchFastStages(**dev, *batched, dtype, nf, 3, size, quick ? 5 : 30);
    }
  }
  if (fast_only) return 0;

  // 1. The peers' problem, per dtype and kernel shape.
  const std::vector<periodogram::CudaKernelShape> shapes = {
      {128, 8, 256, 0},  {128, 16, 256, 0}, {128, 16, 256, 4}, {64, 16, 256, 8},
      {256, 16, 256, 2}, {128, 12, 256, 4}, {128, 20, 256, 0}, {128, 32, 256, 0}};
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    auto req = std::make_shared<periodogram::Request>();
    req->dtype = dtype;
    req->series.push_back(PeerSeries(nx, nf));
    for (const auto& shape : shapes) {
      std::vector<periodogram::SeriesPower> out;
      const DeviceTimes t = TimeOnDevice(**dev, req, &shape, reps, &out, periodogram::ProductForm::kNever);
      const double err = MaxErrorVsCpu(req->series[0], dtype, out[0]);
      Emit(absl::StrFormat(
          R"({"what":"lombscargle kernel","nx":%d,"nf":%d,"dtype":"%s","block":%d,"k":%d,"tile":%d,"min_blocks":%d,"ms":%.4f,"gpairs_per_s":%.1f,"pipeline_ms":%.3f,"max_abs_err_vs_cpu_f64":%s})",
          nx, nf, ElementName(dtype), shape.block, shape.k, shape.tile, shape.min_blocks, t.kernel_ms,
          nx * static_cast<double>(nf) / t.kernel_ms / 1e6, t.total_ms, JsonNumber(err)));
    }
    // The shape the server picks by itself.
    const DeviceTimes t = TimeOnDevice(**dev, req, nullptr, reps, nullptr, periodogram::ProductForm::kNever);
    Emit(absl::StrFormat(R"({"what":"lombscargle kernel auto-shape","nx":%d,"nf":%d,"dtype":"%s","ms":%.4f,"pipeline_ms":%.3f})",
                         nx, nf, ElementName(dtype), t.kernel_ms, t.total_ms));
  }

  // 2. Mixed-length batch: 4,096 series of 200-2,000 samples on 10,000 frequencies.
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    auto req = MixedBatch(dtype, 4096, 10000);
    const DeviceTimes t = TimeOnDevice(**dev, req, nullptr, quick ? 3 : 10, nullptr);
    Emit(absl::StrFormat(R"({"what":"lombscargle mixed batch","series":4096,"samples":"200-2000","pairs":%d,"nf":10000,"dtype":"%s","kernel_ms":%.3f,"pipeline_ms":%.3f})",
                         req->pairs(), ElementName(dtype), t.kernel_ms, t.total_ms));
  }
  dev->reset();

  // 3. End to end through the server on loopback.
  ServerConfig c;
  c.address = "127.0.0.1:0";
  c.backend.kind = "cuda";
  c.backend.kernel_cache_dir = "/tmp/gpucompute-bench-kernels";
  const auto start0 = Clock::now();
  auto server = Server::Start(c);
  if (!server.ok()) Die(server.status());
  const double start_ms = std::chrono::duration<double, std::milli>(Clock::now() - start0).count();
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                           grpc::InsecureChannelCredentials(), [] {
                                             grpc::ChannelArguments a;
                                             a.SetMaxReceiveMessageSize(1 << 30);
                                             a.SetMaxSendMessageSize(1 << 30);
                                             return a;
                                           }());
  auto stub = v1::Compute::NewStub(channel);
  periodogram::Request small;
  small.dtype = ElementType::kFloat32;
  small.series.push_back(PeerSeries(1000, 1000));
  const auto small_req = ToProto(small);
  {  // connect (TCP + HTTP/2 handshake) so that the first request measures the server alone
    grpc::ClientContext ctx;
    v1::ServerInfoResponse info;
    stub->ServerInfo(&ctx, v1::ServerInfoRequest(), &info);
  }
  const double first = CallMs(*stub, small_req);
  std::vector<double> steady;
  for (int i = 0; i < 50; ++i) steady.push_back(CallMs(*stub, small_req));
  Emit(absl::StrFormat(R"({"what":"server first request","nx":1000,"nf":1000,"dtype":"float32","server_start_ms":%.1f,"first_ms":%.3f,"steady_median_ms":%.3f,"ratio":%.2f})",
                       start_ms, first, Median(steady), first / Median(steady)));
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    periodogram::Request big;
    big.dtype = dtype;
    big.series.push_back(PeerSeries(nx, nf));
    const auto req = ToProto(big);
    std::vector<double> ms;
    for (int i = 0; i < (quick ? 3 : 10); ++i) ms.push_back(CallMs(*stub, req));
    Emit(absl::StrFormat(R"({"what":"server end-to-end","nx":%d,"nf":%d,"dtype":"%s","median_ms":%.3f})", nx, nf,
                         ElementName(dtype), Median(ms)));
    const auto mixed = ToProto(*MixedBatch(dtype, 4096, 10000));
    ms.clear();
    for (int i = 0; i < (quick ? 2 : 5); ++i) ms.push_back(CallMs(*stub, mixed));
    Emit(absl::StrFormat(R"({"what":"server end-to-end mixed batch","series":4096,"nf":10000,"dtype":"%s","median_ms":%.3f})",
                         ElementName(dtype), Median(ms)));
  }
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) { return gpucompute::Main(argc, argv); }
