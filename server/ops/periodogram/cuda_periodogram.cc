// CUDA periodogram host code (see cuda_periodogram.h).
#include "server/ops/periodogram/cuda_periodogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include "absl/strings/str_cat.h"
#include "kernels/embedded_sources.h"
#include "kernels/harmonic_direct.cuh"
#include "kernels/lombscargle_abi.cuh"
#include "kernels/lombscargle_product.cuh"
#include "kernels/nufft_kernels.cuh"
#include "kernels/peak_reduce.cuh"
#include "kernels/top_peaks.cuh"
#include "server/common/nvtx.h"
#include "server/common/parallel_for.h"
#include "server/common/status_macros.h"
#include "server/ops/periodogram/nufft.h"
#include "server/runtime/cuda/cublaslt.h"
#include "server/runtime/cuda/cuda_resources.h"
#include "server/runtime/cuda/cufft.h"

namespace gpucompute::periodogram {
namespace {

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsSeriesDesc;
using gpucompute_kernels::LsPeak;

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the sections of the input buffer (the same on host and device).
struct InputLayout {
  size_t desc = 0, work = 0, seg = 0, hdesc = 0, hwork = 0, ndesc = 0, ntrans = 0, pdesc = 0,
         topk = 0, t = 0, w = 0, wy = 0, freqs = 0, done = 0, total = 0;
};

// `blocks`: the NVRTC kernel's work items; `counters`: its chunks' completion counters (0 when
// no chunk is summed in parts), zeros copied in with the rest.
InputLayout MakeInputLayout(size_t series, size_t blocks, size_t samples, size_t freqs, int elem,
                            size_t harmonic_series, size_t harmonic_blocks, size_t fast_series,
                            size_t transforms, size_t product_pieces, size_t top_peaks_series,
                            size_t counters) {
  InputLayout l;
  size_t at = 0;
  l.desc = at;   at = AlignUp(at + series * sizeof(LsSeriesDesc));
  l.work = at;   at = AlignUp(at + blocks * sizeof(LsBlockWork));
  l.seg = at;    at = AlignUp(at + 2 * series * sizeof(long long));  // partial-peak ranges
  l.hdesc = at;  at = AlignUp(at + harmonic_series * sizeof(kernels::HarmonicDirectDesc));
  l.hwork = at;  at = AlignUp(at + harmonic_blocks * sizeof(LsBlockWork));
  l.ndesc = at;  at = AlignUp(at + fast_series * sizeof(kernels::NufftSeriesDesc));
  l.ntrans = at; at = AlignUp(at + transforms * sizeof(kernels::NufftTransform));
  l.pdesc = at;  at = AlignUp(at + product_pieces * sizeof(kernels::ProductSeriesDesc));
  l.topk = at;   at = AlignUp(at + top_peaks_series * sizeof(kernels::TopPeaksDesc));
  l.t = at;      at = AlignUp(at + samples * sizeof(double));
  l.w = at;      at = AlignUp(at + samples * elem);
  l.wy = at;     at = AlignUp(at + samples * elem);
  l.freqs = at;  at = AlignUp(at + freqs * sizeof(double));
  l.done = at;   at = AlignUp(at + counters * sizeof(unsigned int));
  l.total = at;
  return l;
}


// Picks the shape for a batch: many frequencies per thread when the batch fills the GPU,
// fewer when it would leave multiprocessors idle.
CudaKernelShape ChooseShape(ComputeType dtype, const std::vector<const SeriesSpec*>& series,
                            int multiprocessors) {
  const std::vector<CudaKernelShape> shapes = DefaultKernelShapes(dtype);
  for (const CudaKernelShape& s : shapes) {
    int64_t blocks = 0;
    for (const SeriesSpec* x : series) blocks += (x->grid.size() + s.block * s.k - 1) / (s.block * s.k);
    if (blocks >= 2 * multiprocessors) return s;
  }
  return shapes.back();
}

}  // namespace

std::vector<CudaKernelShape> DefaultKernelShapes(ComputeType dtype) {
  // Largest work per thread first (fewest sin/cos per pair), then smaller for small batches
  // that would otherwise leave multiprocessors idle. Chosen by periodogram_bench's shape sweep
  // on the H200 (docs/design/periodogram.md).
  if (dtype == ComputeType::kFloat32) {
    return {CudaKernelShape{128, 16, 256, 4}, CudaKernelShape{128, 2, 256, 0}};
  }
  return {CudaKernelShape{128, 16, 256, 0}, CudaKernelShape{128, 2, 256, 0}};
}

KernelSpec LombScargleKernelSpec(ComputeType dtype, const CudaKernelShape& shape) {
  KernelSpec spec;
  spec.label = absl::StrCat("lombscargle<", ComputeTypeName(dtype), ",b", shape.block, ",k",
                            shape.k, ",tile", shape.tile, ",minb", shape.min_blocks, ">");
  spec.program_name = "lombscargle_rtc.cu";
  spec.source = std::string(EmbeddedKernelSource("lombscargle_rtc.cu"));
  for (const char* h : {"lombscargle_abi.cuh", "lombscargle_math.cuh"}) {
    spec.headers.emplace_back(h, std::string(EmbeddedKernelSource(h)));
  }
  spec.options = {absl::StrCat("-DLS_T=", dtype == ComputeType::kFloat32 ? "float" : "double"),
                  absl::StrCat("-DLS_BLOCK=", shape.block), absl::StrCat("-DLS_K=", shape.k),
                  absl::StrCat("-DLS_TILE=", shape.tile),
                  absl::StrCat("-DLS_MIN_BLOCKS=", shape.min_blocks)};
  spec.kernel_name = "lombscargle";
  return spec;
}

absl::StatusOr<cudaKernel_t> PeriodogramKernel(DeviceContext& device, ComputeType dtype,
                                               const CudaKernelShape& shape) {
  // The tag names every parameter of the spec (the sources are embedded in the binary), so
  // the cache can skip building and hashing the spec after the first lookup.
  const std::string tag = absl::StrCat("lombscargle/", ComputeTypeName(dtype), "/", shape.block,
                                       "/", shape.k, "/", shape.tile, "/", shape.min_blocks);
  return device.kernels().GetTagged(tag, [&] { return LombScargleKernelSpec(dtype, shape); });
}

absl::Status WarmUpPeriodogram(DeviceContext& device) {
  // Every slot at once, so that each stream and its staging buffers get their first use here.
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < device.num_streams(); ++i) slots.push_back(device.AcquireSlot());
  absl::Status status;
  for (ComputeType dtype : {ComputeType::kFloat32, ComputeType::kFloat64}) {
    auto request = std::make_shared<Request>();
    request->dtype = dtype;
    SeriesSpec s;
    s.t = {0.0, 0.3, 1.1, 1.7};
    s.y = {1.0, -0.5, 0.25, 2.0};
    s.grid.uniform = UniformGrid{0.1, 0.1, 16};
    // The other paths too: nterms > 1 direct and the fast method (cuFFT's first plan).
    SeriesSpec harmonic = s;
    harmonic.nterms = 2;
    SeriesSpec fast = s;
    fast.method = Method::kFast;
    // And the product form (cuBLAS's first GEMMs; the smallest size it takes by itself):
    // 1,024 samples x 65,536 bins.
    SeriesSpec product;
    for (int i = 0; i < 1024; ++i) {
      product.t.push_back(0.01 * i + 0.001 * (i % 7));
      product.y.push_back(std::sin(0.37 * i));
    }
    product.grid.uniform = UniformGrid{0.5, 0.01, 65536};
    request->series.push_back(std::move(s));
    request->series.push_back(std::move(harmonic));
    request->series.push_back(std::move(fast));
    request->series.push_back(std::move(product));
    Batch batch;
    batch.dtype = dtype;
    batch.requests.push_back(request);
    for (const CudaKernelShape& shape : DefaultKernelShapes(dtype)) {
      EnqueueOptions options;
      options.shape = &shape;
      for (StreamSlot* slot : slots) {
        if (status.ok()) status = EnqueuePeriodogram(device, *slot, batch, &options).status();
      }
      // The next round reuses the slots' staging buffers: wait for this one.
      for (StreamSlot* slot : slots) {
        const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
        if (err != cudaSuccess && status.ok()) {
          status = CudaErrorStatus(err, "periodogram warm-up", __FILE__, __LINE__);
        }
      }
    }
  }
  for (StreamSlot* slot : slots) device.ReleaseSlot(slot);
  return status;
}

namespace {

// How the CUDA path computes a series. kProduct: nterms = 1 direct as matrix products
// (PlanProduct).
enum class SeriesKind { kDirect1, kHarmonicDirect, kFast, kProduct };

SeriesKind KindOf(const SeriesSpec& s) {
  if (s.method == Method::kFast && s.grid.uniform) return SeriesKind::kFast;
  return s.nterms > 1 ? SeriesKind::kHarmonicDirect : SeriesKind::kDirect1;
}

// Where a series' power goes: back to the host, or nowhere past the device: a bootstrap
// series needs only its peak, and discarded power only its peak and top-k peaks, found on the
// device (kernels/top_peaks.cuh) unless more are wanted than it finds.
struct PowerPlan {
  bool copied = true;
  int device_top_k = 0;  // > 0: the top-k peaks are found on the device
};

std::vector<PowerPlan> PlanPower(const Batch& batch) {
  std::vector<PowerPlan> plans;
  plans.reserve(static_cast<size_t>(batch.series_count()));
  for (const auto& request : batch.requests) {
    const bool device_top_k = request->top_k <= kernels::kMaxDeviceTopPeaks;
    for (const SeriesSpec& s : request->series) {
      PowerPlan plan;
      if (s.peak_only()) {
        plan.copied = false;
      } else if (s.power_discarded && device_top_k) {
        plan.copied = false;
        plan.device_top_k = request->top_k;
      }
      plans.push_back(plan);
    }
  }
  return plans;
}

// How the NVRTC kernel sums each nterms = 1 direct series' chunks: with all their samples in
// one block, or, when the batch has too few chunks to fill the GPU (one small series: four
// chunks for 132 multiprocessors), in `parts` blocks of at least kMinPartSamples samples each
// (kernels/lombscargle_abi.cuh). Indices per series of the batch.
struct SampleParts {
  std::vector<int> parts;             // 1: not split (also for other kinds of series)
  std::vector<int64_t> work_begin;    // the series' first work item
  std::vector<int64_t> sums_begin;    // its first row of part sums
  int64_t work_items = 0;
  int64_t sum_rows = 0;
};

constexpr int64_t kMinPartSamples = 64;

SampleParts PlanSampleParts(const std::vector<const SeriesSpec*>& series,
                            const std::vector<SeriesKind>& kinds,
                            const std::vector<int64_t>& chunks, int64_t total_chunks,
                            int64_t target_blocks) {
  SampleParts plan;
  const size_t n = series.size();
  plan.parts.assign(n, 1);
  plan.work_begin.assign(n, 0);
  plan.sums_begin.assign(n, 0);
  const int64_t want = total_chunks > 0 && total_chunks < target_blocks
                           ? (target_blocks + total_chunks - 1) / total_chunks
                           : 1;
  for (size_t i = 0; i < n; ++i) {
    if (kinds[i] != SeriesKind::kDirect1) continue;
    const int64_t most = static_cast<int64_t>(series[i]->t.size()) / kMinPartSamples;
    plan.parts[i] = static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
    plan.work_begin[i] = plan.work_items;
    plan.work_items += chunks[i] * plan.parts[i];
    if (plan.parts[i] > 1) {
      plan.sums_begin[i] = plan.sum_rows;
      plan.sum_rows += chunks[i] * plan.parts[i];
    }
  }
  return plan;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// A piece of direct sums for a uniform grid's lowest frequencies (LowFrequencyPrefix): the
// product form's and the fast method's first n_low frequencies.
kernels::ProductSeriesDesc LowPiece(const SeriesSpec& s, int64_t n_low) {
  kernels::ProductSeriesDesc d{};
  d.df = s.grid.uniform->df;
  d.f_start = s.grid.uniform->f0;
  d.n_samples = static_cast<int>(s.t.size());
  d.first_k = 0;
  d.n_high = n_low;
  d.direct = 1;
  return d;
}

// The product form (kernels/lombscargle_product.cuh) of an nterms = 1 direct series on a
// uniform grid, as pieces (each its own descriptor): first the lowest frequencies
// (LowFrequencyPrefix) by direct sums (LowPiece); then the rest as matrix products, at most
// kProductPiece frequencies a piece (the products hold 12 values per frequency).
struct ProductSplit {
  std::vector<kernels::ProductSeriesDesc> pieces;  // grid, J, rows, first_k, n_high, direct set
};

constexpr int64_t kProductPiece = int64_t{1} << 22;
// Auto: below these the NVRTC kernel (one launch for the whole batch) is as fast. On the H200
// the products run the 1,024 x 1M problem in ~1/2 (float64) to ~1/3 (float32) of its time.
constexpr double kProductMinPairs = double{1 << 26};
constexpr int64_t kProductMinFrequencies = int64_t{1} << 14;

// Float32 operands are FP16 (hi + lo) scaled by the series' largest weight: below FP16's
// normal range (6e-5 of it) an operand keeps only 3e-8 of the scale, so weights spread more
// than this (dy more than 32 times apart) stay with the direct kernel.
constexpr double kProductMaxWeightRatio = 1024;

// force: -1 auto, 0 never, 1 whenever the series qualifies (tests). t_absmax: the series'
// ComputeMoments(s).t_absmax.
std::optional<ProductSplit> PlanProduct(const SeriesSpec& s, double t_absmax, ComputeType dtype,
                                        int force, int64_t max_piece) {
  if (force == 0 || s.nterms != 1 || !s.grid.uniform || s.t.empty()) return std::nullopt;
  const UniformGrid& g = *s.grid.uniform;
  if (!(g.f0 >= 0) || !(g.df > 0) || g.n <= 0) return std::nullopt;
  const int64_t nf = g.n;
  const bool small = static_cast<double>(s.t.size()) * static_cast<double>(nf) < kProductMinPairs;
  if (force < 0 && (small || nf < kProductMinFrequencies)) return std::nullopt;
  if (dtype == ComputeType::kFloat32 && !s.dy.empty()) {
    const auto [lo, hi] = std::minmax_element(s.dy.begin(), s.dy.end());
    const double ratio = (*hi / *lo) * (*hi / *lo);  // w = dy^-2
    if (!(ratio <= kProductMaxWeightRatio)) return std::nullopt;
  }
  const int64_t n_low = LowFrequencyPrefix(g, t_absmax);
  // The low piece is not optional here (the products lose those frequencies to cancellation).
  if (static_cast<double>(n_low) * static_cast<double>(s.t.size()) > kMaxLowFrequencyPairs) {
    return std::nullopt;
  }
  const int64_t n_high = nf - n_low;
  if (n_high == 0 || (force < 0 && n_high < kProductMinFrequencies)) return std::nullopt;
  ProductSplit split;
  kernels::ProductSeriesDesc base{};
  base.df = g.df;
  base.n_samples = static_cast<int>(s.t.size());
  if (n_low > 0) split.pieces.push_back(LowPiece(s, n_low));
  // J ~ sqrt(piece): the operands ((J + rows) x samples) are smallest for a square split.
  const int64_t piece = std::min(n_high, max_piece > 0 ? max_piece : kProductPiece);
  int j = 32;
  while (j < 2048 && static_cast<int64_t>(j) * j < piece) j *= 2;
  for (int64_t first = 0; first < n_high; first += piece) {
    kernels::ProductSeriesDesc d = base;
    d.first_k = n_low + first;
    d.n_high = std::min(piece, n_high - first);
    d.f_start = g.f0 + static_cast<double>(d.first_k) * g.df;
    d.j = j;
    d.rows = static_cast<int>(CeilDiv(d.n_high, j));
    split.pieces.push_back(d);
  }
  return split;
}

// The windowed form's window (kernels/nufft_kernels.cuh) for a series whose points lie within
// max_j * df * t_absmax cycles of 0: the smallest divisor L of M holding every point's cells
// with two to spare either side, a power of two where one divides M and is at most twice that
// (cuFFT's power-of-two sizes run faster: on the H200, 1M float64 modes, 3 transforms,
// M = 2^18 5: L = 2,560 46 us, L = 4,096 35 us); 0 when M / L < 4 (the full grid is as cheap).
int64_t NufftWindow(const NufftPlan& plan, int max_j, double df, double t_absmax) {
  const double half = max_j * std::abs(df) * t_absmax * static_cast<double>(plan.grid_size) +
                      0.5 * plan.width + 2;
  const double need = 2 * std::ceil(half) + 2;
  if (!(need * 4 <= static_cast<double>(plan.grid_size))) return 0;
  int64_t best = plan.grid_size, best_p2 = plan.grid_size;
  for (int64_t p2 = 1; p2 <= plan.grid_size; p2 *= 2) {
    if (plan.grid_size % p2 == 0 && p2 % 2 == 0 && static_cast<double>(p2) >= need) {
      best_p2 = std::min(best_p2, p2);
    }
    for (int64_t p3 = p2; p3 <= plan.grid_size; p3 *= 3) {
      for (int64_t p5 = p3; p5 <= plan.grid_size; p5 *= 5) {
        if (plan.grid_size % p5 == 0 && p5 % 2 == 0 && static_cast<double>(p5) >= need) {
          best = std::min(best, p5);
        }
      }
    }
  }
  if (best_p2 <= 2 * best) best = best_p2;
  return plan.grid_size / best >= 4 ? best : 0;
}

// A fast series' device deconvolution table (NufftCorrection), cached per slot.
struct NufftCorrectionTable {
  DeviceMemory memory;  // modes doubles, then the quadrature's nodes and weights
};

absl::StatusOr<const double*> NufftCorrectionOnDevice(DeviceContext& device, StreamSlot& slot,
                                                      const NufftPlan& plan) {
  const std::string key = absl::StrCat("nufft-correction/", plan.modes, "/", plan.grid_size, "/",
                                       plan.width, "/", plan.beta);
  if (auto* table = slot.cache.Find<NufftCorrectionTable>(key)) {
    return static_cast<const double*>(table->memory.get());
  }
  const NufftQuadrature quad = NufftCorrectionQuadrature(plan);
  const size_t nodes = quad.x.size();
  auto table = std::make_unique<NufftCorrectionTable>();
  ASSIGN_OR_RETURN(table->memory, DeviceMemory::Allocate(device.device(),
                                                         (plan.modes + 2 * nodes) * sizeof(double)));
  double* out = static_cast<double*>(table->memory.get());
  double* x = out + plan.modes;
  double* wphi = x + nodes;
  const cudaStream_t stream = slot.stream.get();
  // From pageable memory: each call returns once its source has been staged.
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x, quad.x.data(), nodes * sizeof(double),
                                       cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(wphi, quad.weight_phi.data(), nodes * sizeof(double),
                                       cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(kernels::LaunchNufftCorrection(x, wphi, static_cast<int>(nodes), plan.modes,
                                                      plan.centre, plan.grid_size, plan.width, out,
                                                      stream));
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  ASSIGN_OR_RETURN(NufftCorrectionTable * stored, slot.cache.Insert(key, std::move(table), stream));
  return static_cast<const double*>(stored->memory.get());
}

// In-place inverse complex FFT of interleaved (re, im) cells in float or double.
cufftResult ExecInverseFft(cufftHandle plan, float* cells) {
  auto* data = reinterpret_cast<cufftComplex*>(cells);
  return cufftExecC2C(plan, data, data, CUFFT_INVERSE);
}
cufftResult ExecInverseFft(cufftHandle plan, double* cells) {
  auto* data = reinterpret_cast<cufftDoubleComplex*>(cells);
  return cufftExecZ2Z(plan, data, data, CUFFT_INVERSE);
}

absl::StatusOr<cufftHandle> NufftFftPlan(StreamSlot& slot, int64_t grid_size, int64_t batch,
                                         ComputeType dtype) {
  const std::string key = absl::StrCat("cufft/", ComputeTypeName(dtype), "/", grid_size, "x", batch);
  CufftPlan* plan = slot.cache.Find<CufftPlan>(key);
  if (plan == nullptr) {
    ASSIGN_OR_RETURN(CufftPlan created,
                     CufftPlan::Create1d(grid_size, batch,
                                         dtype == ComputeType::kFloat32 ? CUFFT_C2C : CUFFT_Z2Z));
    ASSIGN_OR_RETURN(plan, slot.cache.Insert(key, std::make_unique<CufftPlan>(std::move(created)),
                                             slot.stream.get()));
  }
  CUFFT_RETURN_IF_ERROR(cufftSetStream(plan->get(), slot.stream.get()));
  return plan->get();
}

}  // namespace

absl::StatusOr<PendingPeriodogram> EnqueuePeriodogram(DeviceContext& device, StreamSlot& slot,
                                                      const Batch& batch,
                                                      const EnqueueOptions* options) {
  using kernels::HarmonicDirectDesc;
  using kernels::NufftSeriesDesc;
  using kernels::NufftTransform;
  RETURN_IF_ERROR(device.MakeCurrent());
  const cudaStream_t stream = slot.stream.get();
  const int elem = ElementSize(batch.dtype);
  const bool f32 = batch.dtype == ComputeType::kFloat32;
  const std::vector<const SeriesSpec*> series = batch.all_series();
  const size_t n_series = series.size();
  const std::vector<PowerPlan> power_plans = PlanPower(batch);

  // Each series' moments, once: planning and packing read them. Decoded series carry theirs
  // (computed on the thread that received the call); the rest take a few passes here.
  std::vector<SeriesMoments> moments(n_series);
  {
    int64_t samples = 0;
    for (const SeriesSpec* s : series) samples += s->moments ? 0 : static_cast<int64_t>(s->t.size());
    ParallelFor(static_cast<int64_t>(n_series), samples, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) moments[i] = MomentsOf(*series[i]);
    });
  }

  // Which path each series takes; the nterms = 1 direct ones share the NVRTC kernel.
  std::vector<SeriesKind> kinds(n_series);
  std::vector<const SeriesSpec*> direct1;
  std::vector<std::optional<ProductSplit>> products(n_series);
  const int force_product = options ? options->product : -1;
  const int64_t product_piece = options ? options->product_piece : 0;
  for (size_t i = 0; i < n_series; ++i) {
    kinds[i] = KindOf(*series[i]);
    if (kinds[i] == SeriesKind::kDirect1) {
      products[i] =
          PlanProduct(*series[i], moments[i].t_absmax, batch.dtype, force_product, product_piece);
      if (products[i]) {
        kinds[i] = SeriesKind::kProduct;
      } else {
        direct1.push_back(series[i]);
      }
    }
  }
  const CudaKernelShape shape = options && options->shape
                                     ? *options->shape
                                     : ChooseShape(batch.dtype, direct1, device.description().multiprocessors);
  cudaKernel_t kernel = nullptr;
  if (!direct1.empty()) {
    ASSIGN_OR_RETURN(kernel, PeriodogramKernel(device, batch.dtype, shape));
  }

  PendingPeriodogram pending;
  pending.dtype = batch.dtype;
  pending.out_offsets.assign(n_series, -1);
  pending.top_peaks.assign(n_series, -1);
  pending.top_peaks_k.assign(n_series, 0);
  InputLayout layout;
  const int64_t per_block = static_cast<int64_t>(shape.block) * shape.k;
  // Per series: its index in its kind's table, first partial peak, partial count.
  std::vector<int> kind_index(n_series, -1);
  std::vector<int64_t> partial_begin(n_series), partial_count(n_series);
  // Pieces (kernels/lombscargle_product.cuh) of product series and the direct low piece of
  // fast ones, grouped by series; a series' pieces take its partials from piece_partials[i] on.
  std::vector<int> product_first(n_series, -1);   // first piece in the table
  std::vector<int64_t> piece_partials(n_series, 0);
  std::vector<kernels::ProductSeriesDesc> pieces;
  std::vector<int> piece_series;
  std::vector<int64_t> nufft_low;                 // per fast series: its low piece's size
  std::vector<int> nufft_low_piece;               // per fast series: the piece's index, or -1
  std::vector<NufftPlan> nufft_plans;             // per fast series
  std::vector<std::vector<HarmonicTerm>> nufft_terms;
  std::vector<int64_t> nufft_windows;             // per fast series: L, or 0 (full grid)
  std::vector<int> harmonic_order;                // harmonic series, by nterms
  int64_t n_blocks = 0, harmonic_blocks = 0, total_partials = 0, copied_freqs = 0, scratch_freqs = 0;
  int64_t top_peaks_series = 0, top_peaks_entries = 0;  // found on the device
  int64_t grid_cells = 0, window_cells = 0, n_transforms = 0, max_fast_samples = 0;
  SampleParts split;  // how the NVRTC kernel's chunks are summed (PlanSampleParts)
  int n_harmonic = 0, n_fast = 0;
  {
    NVTX_RANGE("periodogram.pack");
    int64_t samples = 0, explicit_freqs = 0;
    for (size_t i = 0; i < n_series; ++i) {
      const SeriesSpec& s = *series[i];
      const int64_t nf = s.grid.size();
      samples += static_cast<int64_t>(s.t.size());
      if (!s.grid.uniform) explicit_freqs += nf;
      if (power_plans[i].copied) copied_freqs += nf;
      if (power_plans[i].device_top_k > 0) {
        ++top_peaks_series;
        top_peaks_entries += power_plans[i].device_top_k;
      }
      switch (kinds[i]) {
        case SeriesKind::kDirect1:
          partial_count[i] = CeilDiv(nf, per_block);
          n_blocks += partial_count[i];
          break;
        case SeriesKind::kProduct: {
          product_first[i] = static_cast<int>(pieces.size());
          partial_count[i] = 0;
          for (const kernels::ProductSeriesDesc& p : products[i]->pieces) {
            pieces.push_back(p);
            piece_series.push_back(static_cast<int>(i));
            partial_count[i] += kernels::ProductPartials(p);
          }
          break;
        }
        case SeriesKind::kHarmonicDirect:
          kind_index[i] = n_harmonic++;
          partial_count[i] = CeilDiv(nf, kernels::kHarmonicDirectBlock);
          harmonic_blocks += partial_count[i];
          harmonic_order.push_back(static_cast<int>(i));
          break;
        case SeriesKind::kFast: {
          kind_index[i] = n_fast++;
          nufft_plans.push_back(MakeNufftPlan(nf, batch.dtype, s.nterms));
          nufft_terms.push_back(HarmonicTerms(s.nterms, s.fit_mean));
          if (nufft_plans.back().width > kernels::kNufftMaxWidth) {
            return absl::InternalError("NUFFT kernel width above the spreading kernel's limit");
          }
          // The power kernel reads the transforms in HarmonicTerms' order (pinned by the test
          // NufftTerms.OrderIsThePowerKernels).
          int max_j = 1;
          for (const HarmonicTerm& h : nufft_terms.back()) max_j = std::max(max_j, h.j);
          const double t_absmax = moments[i].t_absmax;
          nufft_windows.push_back(nf > 0 ? NufftWindow(nufft_plans.back(), max_j, s.grid.uniform->df,
                                                       t_absmax)
                                         : 0);
          {
            const NufftPlan& plan = nufft_plans.back();
            const int64_t copies = nufft_windows.back() > 0 ? plan.grid_size / nufft_windows.back() : 0;
            const int64_t q_count =
                copies > 0 ? FloorDiv(nf - 1 - plan.centre, copies) - FloorDiv(-plan.centre, copies) + 1 : 0;
            partial_count[i] = nf > 0 ? kernels::NufftPowerBlocks(nf, copies, q_count) : 0;
          }
          // nterms 1: the lowest frequencies by direct sums (nufft.h), a piece of their own.
          const int64_t low = s.nterms == 1 ? LowFrequencyPrefix(*s.grid.uniform, t_absmax) : 0;
          const bool low_direct =
              static_cast<double>(low) * static_cast<double>(s.t.size()) <= kMaxLowFrequencyPairs;
          nufft_low.push_back(low_direct ? low : 0);
          nufft_low_piece.push_back(nufft_low.back() > 0 ? static_cast<int>(pieces.size()) : -1);
          if (nufft_low.back() > 0) {
            product_first[i] = static_cast<int>(pieces.size());
            piece_partials[i] = partial_count[i];
            pieces.push_back(LowPiece(s, nufft_low.back()));
            piece_series.push_back(static_cast<int>(i));
            partial_count[i] += kernels::ProductPartials(pieces.back());
          }
          if (nf > 0) {
            window_cells += nufft_windows.back() * static_cast<int64_t>(nufft_terms.back().size());
            grid_cells += nufft_plans.back().grid_size * static_cast<int64_t>(nufft_terms.back().size());
            n_transforms += static_cast<int64_t>(nufft_terms.back().size());
            max_fast_samples = std::max<int64_t>(max_fast_samples, static_cast<int64_t>(s.t.size()));
          }
          break;
        }
      }
    }
    std::stable_sort(harmonic_order.begin(), harmonic_order.end(),
                     [&](int a, int b) { return series[a]->nterms < series[b]->nterms; });
    // Partial peaks: the NVRTC kernel's blocks first (it writes partial blockIdx.x), then the
    // other kernels' ranges, each series' range contiguous.
    int64_t direct_at = 0, other_at = n_blocks;
    for (size_t i = 0; i < n_series; ++i) {
      int64_t& at = kinds[i] == SeriesKind::kDirect1 ? direct_at : other_at;
      partial_begin[i] = at;
      at += partial_count[i];
      if (product_first[i] >= 0) {
        int64_t piece_at = partial_begin[i] + piece_partials[i];
        for (size_t p = product_first[i]; p < pieces.size() && piece_series[p] == static_cast<int>(i); ++p) {
          pieces[p].peak_offset = piece_at;
          piece_at += kernels::ProductPartials(pieces[p]);
        }
      }
    }
    total_partials = other_at;
    split = PlanSampleParts(series, kinds, partial_count, n_blocks,
                            2 * device.description().multiprocessors);

    layout = MakeInputLayout(n_series, split.work_items, samples, explicit_freqs, elem, n_harmonic,
                             harmonic_blocks, n_fast, n_transforms, pieces.size(),
                             static_cast<size_t>(top_peaks_series),
                             split.sum_rows > 0 ? static_cast<size_t>(n_blocks) : 0);
    RETURN_IF_ERROR(slot.staging_in.Reserve(layout.total));
    char* base = static_cast<char*>(slot.staging_in.data());
    std::memset(base + layout.done, 0, layout.total - layout.done);  // completion counters
    auto* desc = reinterpret_cast<LsSeriesDesc*>(base + layout.desc);
    auto* work = reinterpret_cast<LsBlockWork*>(base + layout.work);
    auto* begins = reinterpret_cast<long long*>(base + layout.seg);
    auto* ends = begins + n_series;
    auto* pdesc = reinterpret_cast<kernels::ProductSeriesDesc*>(base + layout.pdesc);
    auto* hdesc = reinterpret_cast<HarmonicDirectDesc*>(base + layout.hdesc);
    auto* hwork = reinterpret_cast<LsBlockWork*>(base + layout.hwork);
    auto* ndesc = reinterpret_cast<NufftSeriesDesc*>(base + layout.ndesc);
    auto* ntrans = reinterpret_cast<NufftTransform*>(base + layout.ntrans);
    auto* topk = reinterpret_cast<kernels::TopPeaksDesc*>(base + layout.topk);
    auto* t = reinterpret_cast<double*>(base + layout.t);
    auto* freqs = reinterpret_cast<double*>(base + layout.freqs);
    // Offsets first (cheap, serial), then the per-sample work on several threads when the
    // batch is large: each series writes only its own ranges. Power that is copied back comes
    // first in the output, then the peaks and the top-k peaks found on the device. Power not
    // copied back is written to device scratch after them where it is read (device top-k) or
    // always written (the NVRTC kernel's nterms = 1 direct series), else not at all.
    const size_t power_bytes = AlignUp(static_cast<size_t>(copied_freqs) * elem);
    pending.top_peaks_offset = power_bytes + AlignUp(n_series * sizeof(LsPeak));
    const size_t scratch_at =
        (pending.top_peaks_offset + AlignUp(static_cast<size_t>(top_peaks_entries) * sizeof(LsPeak))) / elem;
    int64_t sample_at = 0, freq_at = 0, copied_at = 0, scratch_offset = 0, grid_at = 0, window_at = 0;
    int64_t top_peaks_at = 0, top_peaks_entry = 0;
    int transform_at = 0;
    for (size_t i = 0; i < n_series; ++i) {
      const SeriesSpec& s = *series[i];
      const int64_t nf = s.grid.size();
      LsSeriesDesc& d = desc[i];
      d = LsSeriesDesc{};
      d.sample_offset = sample_at;
      d.n_freq = nf;
      d.n_samples = static_cast<int>(s.t.size());
      d.explicit_offset = s.grid.uniform ? -1 : freq_at;
      const PowerPlan& plan = power_plans[i];
      if (plan.copied) {
        pending.out_offsets[i] = copied_at;
        d.out_offset = copied_at;
        copied_at += nf;
      } else {
        d.out_offset = static_cast<long long>(scratch_at) + scratch_offset;
        if (kinds[i] == SeriesKind::kDirect1 || plan.device_top_k > 0) scratch_offset += nf;
      }
      if (plan.device_top_k > 0) {
        topk[top_peaks_at++] = kernels::TopPeaksDesc{d.out_offset, nf, top_peaks_entry,
                                                     plan.device_top_k, 0};
        pending.top_peaks[i] = top_peaks_entry;
        pending.top_peaks_k[i] = plan.device_top_k;
        top_peaks_entry += plan.device_top_k;
      }
      // The nvcc kernels skip -1.
      const long long out_offset = plan.copied || plan.device_top_k > 0 ? d.out_offset : -1;
      begins[i] = partial_begin[i];
      ends[i] = partial_begin[i] + partial_count[i];
      if (product_first[i] >= 0) {
        for (size_t p = product_first[i]; p < pieces.size() && piece_series[p] == static_cast<int>(i); ++p) {
          pieces[p].sample_offset = sample_at;
          pieces[p].out_offset = out_offset;
        }
      }
      if (kinds[i] == SeriesKind::kHarmonicDirect) {
        HarmonicDirectDesc& h = hdesc[kind_index[i]];
        h = HarmonicDirectDesc{};
        h.sample_offset = sample_at;
        h.n_freq = nf;
        h.explicit_offset = d.explicit_offset;
        h.out_offset = out_offset;
        h.peak_offset = partial_begin[i];
        h.f0 = s.grid.uniform ? s.grid.uniform->f0 : 0;
        h.df = s.grid.uniform ? s.grid.uniform->df : 0;
        h.n_samples = d.n_samples;
        h.nterms = s.nterms;
        h.fit_mean = s.fit_mean ? 1 : 0;
        h.normalization = static_cast<int>(s.normalization);
      } else if (kinds[i] == SeriesKind::kFast) {
        const int fi = kind_index[i];
        const NufftPlan& plan = nufft_plans[fi];
        const std::vector<HarmonicTerm>& terms = nufft_terms[fi];
        NufftSeriesDesc& n = ndesc[fi];
        n = NufftSeriesDesc{};
        n.sample_offset = sample_at;
        n.grid_offset = grid_at;
        n.grid_size = plan.grid_size;
        n.modes = plan.modes;
        n.centre = plan.centre;
        n.out_offset = out_offset;
        n.peak_offset = partial_begin[i];
        n.fc = s.grid.uniform->f0 + static_cast<double>(plan.centre) * s.grid.uniform->df;
        n.df = s.grid.uniform->df;
        n.beta = plan.beta;
        n.n_samples = d.n_samples;
        n.width = plan.width;
        n.nterms = s.nterms;
        n.fit_mean = s.fit_mean ? 1 : 0;
        n.normalization = static_cast<int>(s.normalization);
        n.first_transform = transform_at;
        n.n_transforms = nf > 0 ? static_cast<int>(terms.size()) : 0;
        for (int k = 0; k < n.n_transforms; ++k) {
          ntrans[transform_at++] = NufftTransform{fi, terms[k].j, terms[k].weighted_y ? 1 : 0, 0};
        }
        grid_at += plan.grid_size * n.n_transforms;
        n.window = nufft_windows[fi];
        n.low = nufft_low[fi];
        n.window_offset = window_at;
        n.two_over_m = 2.0 / static_cast<double>(plan.grid_size);
        if (n.window > 0) {
          const int64_t copies = plan.grid_size / n.window;
          n.q_min = FloorDiv(-plan.centre, copies);
          n.q_count = FloorDiv(nf - 1 - plan.centre, copies) - n.q_min + 1;
        }
        window_at += n.window * n.n_transforms;
      }
      sample_at += d.n_samples;
      if (!s.grid.uniform) freq_at += nf;
    }
    // The nterms > 1 direct work table, grouped by nterms (one launch per group).
    {
      int64_t at = 0;
      for (int i : harmonic_order) {
        for (int64_t c = 0; c < partial_count[i]; ++c) {
          hwork[at++] = LsBlockWork{kind_index[i], static_cast<int>(c), 0, 1, 0, 0, 0, -1};
        }
      }
    }
    ParallelFor(static_cast<int64_t>(n_series), samples, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const SeriesSpec& s = *series[i];
        const SeriesMoments& m = moments[i];
        LsSeriesDesc& d = desc[i];
        d.fit_mean = s.fit_mean ? 1 : 0;
        d.normalization = static_cast<int>(s.normalization);
        d.yy = m.yy;
        d.psd_scale = 0.5 * m.inv_var_sum;
        d.t_absmax = m.t_absmax;
        if (kinds[i] == SeriesKind::kHarmonicDirect) {
          hdesc[kind_index[i]].yy = d.yy;
          hdesc[kind_index[i]].psd_scale = d.psd_scale;
        } else if (kinds[i] == SeriesKind::kFast) {
          ndesc[kind_index[i]].yy = d.yy;
          ndesc[kind_index[i]].psd_scale = d.psd_scale;
        }
        if (s.grid.uniform) {
          d.f0 = s.grid.uniform->f0;
          d.df = s.grid.uniform->df;
        } else {
          std::memcpy(freqs + d.explicit_offset, s.grid.explicit_frequencies.data(),
                      s.grid.explicit_frequencies.size() * sizeof(double));
        }
        const int64_t at = d.sample_offset;
        if (f32) {
          WritePrepared(s, m, t + at, reinterpret_cast<float*>(base + layout.w) + at,
                        reinterpret_cast<float*>(base + layout.wy) + at);
        } else {
          WritePrepared(s, m, t + at, reinterpret_cast<double*>(base + layout.w) + at,
                        reinterpret_cast<double*>(base + layout.wy) + at);
        }
        if (kinds[i] == SeriesKind::kDirect1) {
          const int parts = split.parts[i];
          const int n = static_cast<int>(s.t.size());
          for (int64_t c = 0; c < partial_count[i]; ++c) {
            for (int p = 0; p < parts; ++p) {
              LsBlockWork& job = work[split.work_begin[i] + c * parts + p];
              job.series = static_cast<int>(i);
              job.chunk = static_cast<int>(c);
              job.part = p;
              job.parts = parts;
              job.sample_begin = static_cast<int>(static_cast<int64_t>(n) * p / parts);
              job.sample_end = static_cast<int>(static_cast<int64_t>(n) * (p + 1) / parts);
              job.slot = static_cast<int>(partial_begin[i] + c);
              job.sums = parts > 1 ? static_cast<int>(split.sums_begin[i] + c * parts) : -1;
            }
          }
        }
        if (product_first[i] >= 0) {
          // Float32 operands carry the amplitudes scaled to at most 1 (FP16's range).
          double scale_w = 1, scale_wy = 1;
          if (f32 && kinds[i] == SeriesKind::kProduct) {
            const auto* pw = reinterpret_cast<const float*>(base + layout.w) + at;
            const auto* pwy = reinterpret_cast<const float*>(base + layout.wy) + at;
            double mw = 0, mwy = 0;
            for (int n = 0; n < d.n_samples; ++n) {
              mw = std::max(mw, std::abs(static_cast<double>(pw[n])));
              mwy = std::max(mwy, std::abs(static_cast<double>(pwy[n])));
            }
            if (mw > 0) scale_w = mw;
            if (mwy > 0) scale_wy = mwy;
          }
          for (size_t p = product_first[i]; p < pieces.size() && piece_series[p] == static_cast<int>(i); ++p) {
            pieces[p].scale_w = scale_w;
            pieces[p].scale_wy = scale_wy;
            pieces[p].yy = d.yy;
            pieces[p].psd_scale = d.psd_scale;
            pieces[p].fit_mean = d.fit_mean;
            pieces[p].normalization = d.normalization;
          }
        }
      }
    });
    if (!pieces.empty()) std::memcpy(pdesc, pieces.data(), pieces.size() * sizeof(pieces[0]));
    pending.peaks_offset = power_bytes;
    scratch_freqs = scratch_offset;
  }

  const size_t power_bytes = pending.peaks_offset;
  // Output: power, one peak per series and the device's top-k peaks (copied back), then
  // device-only scratch power and one partial peak per block.
  const size_t out_bytes =
      pending.top_peaks_offset + AlignUp(static_cast<size_t>(top_peaks_entries) * sizeof(LsPeak));
  const size_t partials_at = out_bytes + AlignUp(static_cast<size_t>(scratch_freqs) * elem);
  // Then the part sums of chunks summed in parts (SampleParts).
  const size_t part_sums_at = AlignUp(partials_at + static_cast<size_t>(total_partials) * sizeof(LsPeak));
  const size_t part_sum_row = static_cast<size_t>(shape.k) * shape.block * 6 * elem;
  const size_t device_out_bytes = part_sums_at + static_cast<size_t>(split.sum_rows) * part_sum_row;
  RETURN_IF_ERROR(slot.staging_out.Reserve(out_bytes));

  // Stream-ordered buffers, freed on the stream on every path (an early error return too: the
  // pool keeps what it is given back, so a leak here would be for the life of the process).
  void* d_in = nullptr;
  void* d_out = nullptr;
  void* d_grid = nullptr;
  void* d_windows = nullptr;
  void* d_product = nullptr;
  struct FreeOnStream {
    void** ptrs[5];
    cudaStream_t stream;
    ~FreeOnStream() {
      for (void** p : ptrs) {
        if (*p != nullptr) cudaFreeAsync(*p, stream);
      }
    }
  } release{{&d_in, &d_out, &d_grid, &d_windows, &d_product}, stream};
  CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&d_in, layout.total, device.memory_pool(), stream));
  CUDA_RETURN_IF_ERROR(
      cudaMallocFromPoolAsync(&d_out, device_out_bytes, device.memory_pool(), stream));
  const size_t grid_bytes = static_cast<size_t>(grid_cells) * 2 * elem;
  if (grid_bytes > 0) {
    CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&d_grid, grid_bytes, device.memory_pool(), stream));
  }
  const size_t window_bytes = static_cast<size_t>(window_cells) * 2 * elem;
  if (window_bytes > 0) {
    CUDA_RETURN_IF_ERROR(
        cudaMallocFromPoolAsync(&d_windows, window_bytes, device.memory_pool(), stream));
  }
  // The product form's operands and products, sized for the largest piece and chunk (pieces
  // run one after another on the stream and reuse them).
  struct ProductScratch {
    size_t b = 0, a1 = 0, a2 = 0, c1 = 0, c2 = 0, total = 0;  // bytes: B_1 and B_2 b each
  } product_scratch;
  if (!pieces.empty()) {
    const size_t op = f32 ? 2 : 8, acc = f32 ? 4 : 8;
    for (const kernels::ProductSeriesDesc& p : pieces) {
      if (p.direct) continue;
      const int k = kernels::ProductChunkK(std::min(p.n_samples, kernels::kProductChunk), f32);
      product_scratch.b = std::max(product_scratch.b, AlignUp(kernels::ProductBElements(p.j, k) * op));
      product_scratch.a1 = std::max(product_scratch.a1, AlignUp(kernels::ProductA1Elements(p.rows, k) * op));
      product_scratch.a2 = std::max(product_scratch.a2, AlignUp(kernels::ProductA2Elements(p.rows, k) * op));
      product_scratch.c1 = std::max(product_scratch.c1, AlignUp(kernels::ProductC1Elements(p.j, p.rows) * acc));
      product_scratch.c2 = std::max(product_scratch.c2, AlignUp(kernels::ProductC2Elements(p.j, p.rows) * acc));
    }
    product_scratch.total = 2 * product_scratch.b + product_scratch.a1 + product_scratch.a2 +
                            product_scratch.c1 + product_scratch.c2;
    if (product_scratch.total > 0) {  // 0: only low pieces
      CUDA_RETURN_IF_ERROR(
          cudaMallocFromPoolAsync(&d_product, product_scratch.total, device.memory_pool(), stream));
    }
  }
  {
    NVTX_RANGE("periodogram.copy_in");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_in, slot.staging_in.data(), layout.total,
                                         cudaMemcpyHostToDevice, stream));
  }
  {
    NVTX_RANGE("periodogram.kernel");
    char* in = static_cast<char*>(d_in);
    const void* a_desc = in + layout.desc;
    const void* a_work = in + layout.work;
    const double* a_t = reinterpret_cast<const double*>(in + layout.t);
    const void* a_w = in + layout.w;
    const void* a_wy = in + layout.wy;
    const double* a_freqs = reinterpret_cast<const double*>(in + layout.freqs);
    void* a_power = d_out;
    auto* partials = reinterpret_cast<LsPeak*>(static_cast<char*>(d_out) + partials_at);
    void* a_block_peaks = partials;
    void* a_part_sums = static_cast<char*>(d_out) + part_sums_at;
    void* a_part_done = in + layout.done;
    void* args[] = {&a_desc, &a_work,  &a_t,           &a_w,         &a_wy,
                    &a_freqs, &a_power, &a_block_peaks, &a_part_sums, &a_part_done};
    if (options && options->before) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->before, stream));
    if (split.work_items > 0) {
      CUDA_RETURN_IF_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
                                            dim3(static_cast<unsigned>(split.work_items)),
                                            dim3(shape.block), args, 0, stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    // nterms > 1, direct: one launch per nterms.
    const auto* hdesc = reinterpret_cast<const HarmonicDirectDesc*>(in + layout.hdesc);
    const auto* hwork = reinterpret_cast<const LsBlockWork*>(in + layout.hwork);
    int64_t blocks_before = 0;  // hwork entries of the groups already launched
    for (size_t g = 0; g < harmonic_order.size();) {
      const int q = series[harmonic_order[g]]->nterms;
      int64_t blocks = 0;
      size_t e = g;
      for (; e < harmonic_order.size() && series[harmonic_order[e]]->nterms == q; ++e) {
        blocks += partial_count[harmonic_order[e]];
      }
      if (blocks > 0) {
        if (f32) {
          CUDA_RETURN_IF_ERROR(kernels::LaunchHarmonicDirect<float>(
              q, hdesc, hwork + blocks_before, static_cast<int>(blocks), a_t,
              static_cast<const float*>(a_w), static_cast<const float*>(a_wy), a_freqs,
              static_cast<float*>(a_power), partials, stream));
        } else {
          CUDA_RETURN_IF_ERROR(kernels::LaunchHarmonicDirect<double>(
              q, hdesc, hwork + blocks_before, static_cast<int>(blocks), a_t,
              static_cast<const double*>(a_w), static_cast<const double*>(a_wy), a_freqs,
              static_cast<double*>(a_power), partials, stream));
        }
        CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
      }
      blocks_before += blocks;
      g = e;
    }
    const auto* dev_pdesc = reinterpret_cast<const kernels::ProductSeriesDesc*>(in + layout.pdesc);
    // Fast: spread every transform, FFT each series' transforms (one batched plan), power (and
    // the low piece's frequencies in the same launch).
    if (n_transforms > 0) {
      const auto* ndesc = reinterpret_cast<const NufftSeriesDesc*>(in + layout.ndesc);
      const auto* ntrans = reinterpret_cast<const NufftTransform*>(in + layout.ntrans);
      const auto* host_ndesc =
          reinterpret_cast<const NufftSeriesDesc*>(static_cast<char*>(slot.staging_in.data()) + layout.ndesc);
      // Zero what the spreading adds into: the windows, and the full grids of the other series
      // (a windowed series' grid is written whole by its expansion).
      if (window_bytes > 0) CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_windows, 0, window_bytes, stream));
      for (int fi = 0; fi < n_fast; ++fi) {
        const NufftSeriesDesc& h = host_ndesc[fi];
        if (h.window == 0 && h.n_transforms > 0) {
          CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<char*>(d_grid) + h.grid_offset * 2 * elem, 0,
                                               static_cast<size_t>(h.grid_size * h.n_transforms) * 2 * elem,
                                               stream));
        }
      }
      // The launches in the compute type T (one body for float and double).
      auto run_fast = [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        CUDA_RETURN_IF_ERROR(kernels::LaunchNufftSpread<T>(
            ndesc, ntrans, static_cast<int>(n_transforms), static_cast<int>(max_fast_samples), a_t,
            static_cast<const T*>(a_w), static_cast<const T*>(a_wy), static_cast<T*>(d_grid),
            static_cast<T*>(d_windows), stream));
        CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
        for (int fi = 0; fi < n_fast; ++fi) {
          const NufftPlan& plan = nufft_plans[fi];
          const NufftSeriesDesc& h = host_ndesc[fi];
          if (h.n_transforms == 0) continue;
          // Windowed: R twiddled copies of each window, FFTs of L points; else FFTs of M points.
          const int64_t fft_size = h.window > 0 ? h.window : plan.grid_size;
          const int64_t fft_batch = h.n_transforms * (plan.grid_size / fft_size);
          if (h.window > 0) {
            CUDA_RETURN_IF_ERROR(kernels::LaunchNufftExpand<T>(
                ndesc, fi, h, static_cast<const T*>(d_windows), static_cast<T*>(d_grid), stream));
            CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
          }
          // The plan, then the table (cached per slot; built on first use, on this stream). Each
          // lookup may evict older entries (after synchronising the stream, so work already
          // queued is done with them) but not the one just used: fetched per series, right
          // before the launches that read them.
          ASSIGN_OR_RETURN(cufftHandle fft, NufftFftPlan(slot, fft_size, fft_batch, batch.dtype));
          ASSIGN_OR_RETURN(const double* correction, NufftCorrectionOnDevice(device, slot, plan));
          CUFFT_RETURN_IF_ERROR(ExecInverseFft(fft, static_cast<T*>(d_grid) + 2 * h.grid_offset));
          kernels::NufftLowPiece<T> low;
          if (nufft_low_piece[fi] >= 0) {
            low = {dev_pdesc, nufft_low_piece[fi], a_t, static_cast<const T*>(a_w),
                   static_cast<const T*>(a_wy)};
          }
          CUDA_RETURN_IF_ERROR(kernels::LaunchNufftPower<T>(ndesc, fi, h, static_cast<const T*>(d_grid),
                                                            correction, static_cast<T*>(a_power),
                                                            partials, low, stream));
          CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
        }
        return absl::OkStatus();
      };
      RETURN_IF_ERROR(f32 ? run_fast(0.0f) : run_fast(0.0));
    }
    // Product form: per piece, per chunk of samples the operands and two GEMMs (accumulating
    // over chunks), then the power.
    if (!pieces.empty()) {
      char* scratch = static_cast<char*>(d_product);
      void* b1 = scratch;
      void* b2 = scratch + product_scratch.b;
      void* a1 = scratch + 2 * product_scratch.b;
      void* a2 = static_cast<char*>(a1) + product_scratch.a1;
      void* c1 = static_cast<char*>(a2) + product_scratch.a2;
      void* c2 = static_cast<char*>(c1) + product_scratch.c1;
      const cublasHandle_t blas = slot.cublas.get();
      for (size_t pi = 0; pi < pieces.size(); ++pi) {
        const kernels::ProductSeriesDesc& p = pieces[pi];
        const int index = static_cast<int>(pi);
        if (p.direct) {
          if (kinds[piece_series[pi]] == SeriesKind::kFast) continue;  // run by the power launch
          if (f32) {
            CUDA_RETURN_IF_ERROR((kernels::LaunchProductLow<float>(
                dev_pdesc, index, p, a_t, static_cast<const float*>(a_w),
                static_cast<const float*>(a_wy), static_cast<float*>(a_power), partials, stream)));
          } else {
            CUDA_RETURN_IF_ERROR((kernels::LaunchProductLow<double>(
                dev_pdesc, index, p, a_t, static_cast<const double*>(a_w),
                static_cast<const double*>(a_wy), static_cast<double*>(a_power), partials, stream)));
          }
          CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
          continue;
        }
        const int m = 2 * p.j;
        for (int first = 0; first < p.n_samples; first += kernels::kProductChunk) {
          const int n = std::min(kernels::kProductChunk, p.n_samples - first);
          const int k = kernels::ProductChunkK(n, f32);
          if (f32) {
            CUDA_RETURN_IF_ERROR(kernels::LaunchProductOperandsF16(
                dev_pdesc, index, p, first, n, k, a_t, static_cast<const float*>(a_w),
                static_cast<const float*>(a_wy), b1, b2, a1, a2, stream));
            // The correction products (hi lo + lo hi, K = 2n, small) first, then the main
            // product (hi hi, K = n) onto them: the tensor cores' accumulation truncates at each
            // k step, so the big sums see only the n / 16 steps of the main product.
            const int seg = k / 3;
            const float one = 1, beta = first == 0 ? 0.f : 1.f;
            auto gemm = [&](int cols, const void* b, const void* a, void* c, int kk, float bt) {
              return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, cols, kk, &one, b, CUDA_R_16F, m, a,
                                  CUDA_R_16F, k, &bt, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT);
            };
            const auto* b1h = static_cast<const __half*>(b1);
            const auto* b2h = static_cast<const __half*>(b2);
            const auto* a1h = static_cast<const __half*>(a1);
            const auto* a2h = static_cast<const __half*>(a2);
            const int64_t b_seg = static_cast<int64_t>(m) * seg;  // one segment of B's columns
            CUBLAS_RETURN_IF_ERROR(gemm(4 * p.rows, b1h + b_seg, a1h + seg, c1, 2 * seg, beta));
            CUBLAS_RETURN_IF_ERROR(gemm(4 * p.rows, b1h, a1h, c1, seg, 1.f));
            CUBLAS_RETURN_IF_ERROR(gemm(2 * p.rows, b2h + b_seg, a2h + seg, c2, 2 * seg, beta));
            CUBLAS_RETURN_IF_ERROR(gemm(2 * p.rows, b2h, a2h, c2, seg, 1.f));
          } else {
            CUDA_RETURN_IF_ERROR(kernels::LaunchProductOperandsF64(
                dev_pdesc, index, p, first, n, k, a_t, static_cast<const double*>(a_w),
                static_cast<const double*>(a_wy), static_cast<double*>(b1), static_cast<double*>(b2),
                static_cast<double*>(a1), static_cast<double*>(a2), stream));
            const double one = 1, beta = first == 0 ? 0.0 : 1.0;
            CUBLAS_RETURN_IF_ERROR(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 4 * p.rows, k, &one,
                                               static_cast<const double*>(b1), m,
                                               static_cast<const double*>(a1), k, &beta,
                                               static_cast<double*>(c1), m));
            CUBLAS_RETURN_IF_ERROR(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 2 * p.rows, k, &one,
                                               static_cast<const double*>(b2), m,
                                               static_cast<const double*>(a2), k, &beta,
                                               static_cast<double*>(c2), m));
          }
          CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
        }
        if (f32) {
          CUDA_RETURN_IF_ERROR((kernels::LaunchProductPower<float, float>(
              dev_pdesc, index, p, static_cast<const float*>(c1), static_cast<const float*>(c2),
              static_cast<float*>(a_power), partials, stream)));
        } else {
          CUDA_RETURN_IF_ERROR((kernels::LaunchProductPower<double, double>(
              dev_pdesc, index, p, static_cast<const double*>(c1), static_cast<const double*>(c2),
              static_cast<double*>(a_power), partials, stream)));
        }
        CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
      }
    }
    const auto* begins = reinterpret_cast<const long long*>(in + layout.seg);
    auto* peaks = reinterpret_cast<LsPeak*>(static_cast<char*>(d_out) + power_bytes);
    CUDA_RETURN_IF_ERROR(kernels::LaunchReducePeaks(partials, begins, begins + n_series,
                                                    static_cast<int>(n_series), peaks, stream));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    if (top_peaks_series > 0) {
      const auto* descs = reinterpret_cast<const kernels::TopPeaksDesc*>(in + layout.topk);
      auto* top = reinterpret_cast<LsPeak*>(static_cast<char*>(d_out) + pending.top_peaks_offset);
      const int count = static_cast<int>(top_peaks_series);
      CUDA_RETURN_IF_ERROR(
          f32 ? kernels::LaunchTopPeaks(static_cast<const float*>(a_power), descs, count, top, stream)
              : kernels::LaunchTopPeaks(static_cast<const double*>(a_power), descs, count, top, stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    if (options && options->after) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->after, stream));
  }
  {
    NVTX_RANGE("periodogram.copy_out");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.staging_out.data(), d_out, out_bytes,
                                         cudaMemcpyDeviceToHost, stream));
  }
  return pending;  // `release` frees the buffers after the copy out, in stream order
}

std::vector<SeriesPower> UnpackPeriodogram(const PendingPeriodogram& pending,
                                           const StreamSlot& slot, const Batch& batch) {
  NVTX_RANGE("periodogram.unpack");
  const int elem = ElementSize(pending.dtype);
  const char* base = static_cast<const char*>(slot.staging_out.data());
  const auto* peaks = reinterpret_cast<const LsPeak*>(base + pending.peaks_offset);
  const auto* top_peaks = reinterpret_cast<const LsPeak*>(base + pending.top_peaks_offset);
  const std::vector<const SeriesSpec*> series = batch.all_series();
  std::vector<SeriesPower> out(series.size());
  int64_t total = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (pending.out_offsets[i] >= 0) total += series[i]->grid.size();
  }
  // Copying power out of pinned memory (and faulting in the strings) dominates for big
  // batches: several threads when there is a lot of it.
  ParallelFor(static_cast<int64_t>(series.size()), total, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const SeriesSpec& s = *series[i];
      SeriesPower& p = out[i];
      const int64_t n = s.grid.size();
      if (pending.out_offsets[i] >= 0) {  // peak-only series leave power empty
        p.power.assign(base + pending.out_offsets[i] * elem, static_cast<size_t>(n) * elem);
      }
      const LsPeak& peak = peaks[i];
      p.peak_index = peak.index < 0 ? 0 : peak.index;
      p.peak_frequency = s.grid.frequency(p.peak_index);
      p.peak_power = peak.index < 0 ? std::nan("") : peak.value;
      if (pending.top_peaks[i] >= 0) {  // the device's top-k, highest first, then index -1
        const LsPeak* top = top_peaks + pending.top_peaks[i];
        for (const LsPeak* e = top; e < top + pending.top_peaks_k[i] && e->index >= 0; ++e) {
          p.peaks.push_back(Peak{e->index, s.grid.frequency(e->index), e->value, 0});
        }
      }
    }
  }, /*min_cost_per_thread=*/int64_t{1} << 21);
  return out;
}

}  // namespace gpucompute::periodogram
