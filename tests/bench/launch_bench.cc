// Where a small batch's server time goes on the GPU machine, stage by stage, on one thread:
// the host's launch (Enqueue: planning, packing, copies and kernels queued), the wait for the
// stream (spinning on an event, as the server's completion poller does) and the unpack; and
// what the CUDA calls the launch is made of cost on this host. Cases: one 1,000-sample x
// 1,000-frequency periodogram (float64 and float32) and one dense row (1024 -> 4096 bf16), the
// small calls of the end-to-end table. JSON lines; medians of --reps (default 2,000), with
// --gap_us of sleep before each batch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/element_type.h"
#include "server/ops/dense/cuda_dense.h"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/ops/periodogram/nufft.h"
#include "server/device/cuda_resources.h"
#include "server/device/device_context.h"

namespace gpucompute {
namespace {

using Clock = std::chrono::steady_clock;

void Die(const absl::Status& s) {
  std::fprintf(stderr, "launch_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median µs of one call of `fn` (after a warm-up).
double TimeCall(int reps, const std::function<void()>& fn) {
  std::vector<double> us;
  for (int r = 0; r < reps + 20; ++r) {
    const auto t0 = Clock::now();
    fn();
    if (r >= 20) us.push_back(Us(t0, Clock::now()));
  }
  return Median(us);
}

void CallCosts(DeviceContext& dev, int reps) {
  StreamSlot* slot = dev.AcquireSlot();
  const cudaStream_t s = slot->stream.get();
  void* d = nullptr;
  cudaMalloc(&d, 1 << 20);
  auto event = CudaEvent::Create(true);
  if (!event.ok()) Die(event.status());
  auto emit = [](const char* what, double us) {
    std::printf("%s\n", absl::StrFormat(R"({"what":"cuda call","call":"%s","us":%.2f})", what, us).c_str());
  };
  emit("cudaSetDevice", TimeCall(reps, [&] { cudaSetDevice(dev.device()); }));
  emit("cudaMallocFromPoolAsync+cudaFreeAsync", TimeCall(reps, [&] {
         void* p = nullptr;
         cudaMallocFromPoolAsync(&p, 8192, dev.memory_pool(), s);
         cudaFreeAsync(p, s);
       }));
  cudaStreamSynchronize(s);
  emit("cudaMemcpyAsync H2D 2 KiB pinned", TimeCall(reps, [&] {
         cudaMemcpyAsync(d, slot->staging_in.data(), 2048, cudaMemcpyHostToDevice, s);
       }));
  cudaStreamSynchronize(s);
  emit("cudaMemcpyAsync D2H 8 KiB pinned", TimeCall(reps, [&] {
         cudaMemcpyAsync(slot->staging_out.data(), d, 8192, cudaMemcpyDeviceToHost, s);
       }));
  cudaStreamSynchronize(s);
  emit("cudaMemsetAsync 8 KiB", TimeCall(reps, [&] { cudaMemsetAsync(d, 0, 8192, s); }));
  cudaStreamSynchronize(s);
  emit("cudaEventRecord", TimeCall(reps, [&] { cudaEventRecord(event->get(), s); }));
  cudaStreamSynchronize(s);
  emit("cudaEventQuery (complete)", TimeCall(reps, [&] { (void)cudaEventQuery(event->get()); }));
  emit("cudaStreamSynchronize (idle)", TimeCall(reps, [&] { cudaStreamSynchronize(s); }));
  emit("round trip: event record + spin", TimeCall(reps, [&] {
         cudaEventRecord(event->get(), s);
         while (cudaEventQuery(event->get()) == cudaErrorNotReady) {
         }
       }));
  cudaFree(d);
  dev.ReleaseSlot(slot);
}

// Launch, wait and unpack of one batch, `reps` times: medians, and the device time between
// `before` and `after` events where the op's options take them.
// Idle time before each repetition (--gap_us): a server at concurrency 1 waits a round trip
// between batches, with its threads asleep.
int g_gap_us = 0;

template <typename Enqueue, typename Unpack>
void Stages(DeviceContext& dev, const std::string& label, int reps, Enqueue enqueue, Unpack unpack) {
  StreamSlot* slot = dev.AcquireSlot();
  auto event = CudaEvent::Create(true);
  if (!event.ok()) Die(event.status());
  std::vector<double> launch, wait, finish;
  for (int r = 0; r < reps + 20; ++r) {
    if (g_gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(g_gap_us));
    const auto t0 = Clock::now();
    auto pending = enqueue(*slot);
    if (!pending.ok()) Die(pending.status());
    cudaEventRecord(event->get(), slot->stream.get());
    const auto t1 = Clock::now();
    while (cudaEventQuery(event->get()) == cudaErrorNotReady) {
    }
    const auto t2 = Clock::now();
    unpack(*pending, *slot);
    const auto t3 = Clock::now();
    if (r >= 20) {
      launch.push_back(Us(t0, t1));
      wait.push_back(Us(t1, t2));
      finish.push_back(Us(t2, t3));
    }
  }
  dev.ReleaseSlot(slot);
  std::printf("%s\n", absl::StrFormat(R"({"what":"small batch stages","case":"%s","gap_us":%d,"launch_us":%.1f,"wait_us":%.1f,"unpack_us":%.1f,"reps":%d})",
                                      label, g_gap_us, Median(launch), Median(wait), Median(finish), reps)
                          .c_str());
}

void Periodogram(DeviceContext& dev, ElementType dtype, int reps) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  periodogram::SeriesSpec s;
  for (int i = 0; i < 1000; ++i) s.t.push_back(100 * u(rng));
  std::sort(s.t.begin(), s.t.end());
  for (double t : s.t) {
    s.dy.push_back(0.1 + 0.2 * u(rng));
    s.y.push_back(std::sin(2 * M_PI * 0.7 * t) + s.dy.back() * (2 * u(rng) - 1));
  }
  s.grid.uniform = periodogram::UniformGrid{0.01, (5.0 - 0.01) / 999, 1000};
  auto request = std::make_shared<periodogram::Request>();
  request->dtype = dtype;
  request->series.push_back(s);
  request->user_series = 1;
  periodogram::Batch batch;
  batch.dtype = dtype;
  batch.requests.push_back(request);
  Stages(dev, absl::StrFormat("periodogram 1000x1000 %s", ElementName(dtype)), reps,
         [&](StreamSlot& slot) { return periodogram::EnqueuePeriodogram(dev, slot, batch); },
         [&](const periodogram::PendingPeriodogram& p, StreamSlot& slot) {
           (void)periodogram::UnpackPeriodogram(p, slot, batch);
         });
}

void DenseRow(DeviceContext& dev, int reps) {
  dense::ModelSpec spec;
  spec.name = "row";
  spec.dtype = ElementType::kBFloat16;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> g(0.f, 1.f);
  dense::LayerSpec layer;
  layer.in = 1024;
  layer.out = 4096;
  layer.layernorm = true;
  layer.activation = dense::Activation::kGeluTanh;
  layer.weight.resize(static_cast<size_t>(layer.in * layer.out));
  for (float& w : layer.weight) w = g(rng) / 32;
  layer.bias.assign(static_cast<size_t>(layer.out), 0.1);
  spec.layers.push_back(std::move(layer));
  auto model = dense::LoadModelOnDevices({&dev}, spec);
  if (!model.ok()) Die(model.status());
  std::vector<float> x(1024);
  for (float& v : x) v = g(rng);
  auto request = std::make_shared<dense::Request>();
  request->model = *model;
  request->input_dtype = ElementType::kBFloat16;
  request->rows = 1;
  std::string input(x.size() * 2, '\0');
  FromFloat(x.data(), static_cast<int64_t>(x.size()), ElementType::kBFloat16, input.data());
  request->input = input;
  dense::Batch batch;
  batch.model = *model;
  batch.input_dtype = ElementType::kBFloat16;
  batch.requests.push_back(request);
  Stages(dev, "dense 1 row 1024->4096 bf16", reps,
         [&](StreamSlot& slot) { return dense::EnqueueDense(dev, slot, batch); },
         [&](const dense::PendingDense& p, StreamSlot& slot) { (void)dense::UnpackDense(p, slot, batch); });
}

int Main(int argc, char** argv) {
  int reps = 2000;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--reps=%d", &reps) == 1) continue;
    if (std::sscanf(argv[i], "--gap_us=%d", &g_gap_us) == 1) continue;
    std::fprintf(stderr, "usage: launch_bench [--reps=N] [--gap_us=N]\n");
    return 2;
  }
  DeviceContext::Options o;
  o.fft_max_size = periodogram::LargestFftSize(int64_t{1} << 26);  // as the server (its warm-up runs a fast series)
  auto dev = DeviceContext::Create(o);
  if (!dev.ok()) Die(dev.status());
  std::printf("%s\n", absl::StrFormat(R"({"what":"device","name":"%s"})", (*dev)->description().name).c_str());
  if (absl::Status s = periodogram::WarmUpPeriodogram(**dev); !s.ok()) Die(s);
  if (absl::Status s = dense::WarmUpDense(**dev); !s.ok()) Die(s);
  CallCosts(**dev, reps);
  Periodogram(**dev, ElementType::kFloat64, reps);
  Periodogram(**dev, ElementType::kFloat32, reps);
  DenseRow(**dev, reps);
  return 0;
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) { return gpucompute::Main(argc, argv); }
