// CUDA periodogram host code (see cuda_periodogram.h).
#include "server/ops/periodogram/cuda_periodogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

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
#include "common/nvtx.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "server/ops/periodogram/batch_plan.h"
#include "server/ops/periodogram/nufft.h"
#include "server/device/cublaslt.h"
#include "server/device/cuda_resources.h"
#include "server/device/fft_plans.h"

namespace gpucompute::periodogram {

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsPeak;
using gpucompute_kernels::LsSeriesDesc;

KernelSpec LombScargleKernelSpec(ElementType dtype, const CudaKernelShape& shape) {
  KernelSpec spec;
  spec.label = absl::StrCat("lombscargle<", ElementName(dtype), ",b", shape.block, ",k",
                            shape.k, ",tile", shape.tile, ",minb", shape.min_blocks, ">");
  spec.program_name = "lombscargle_rtc.cu";
  spec.source = std::string(EmbeddedKernelSource("lombscargle_rtc.cu"));
  for (const char* h : {"lombscargle_abi.cuh", "lombscargle_math.cuh"}) {
    spec.headers.emplace_back(h, std::string(EmbeddedKernelSource(h)));
  }
  spec.options = {absl::StrCat("-DLS_T=", dtype == ElementType::kFloat32 ? "float" : "double"),
                  absl::StrCat("-DLS_BLOCK=", shape.block), absl::StrCat("-DLS_K=", shape.k),
                  absl::StrCat("-DLS_TILE=", shape.tile),
                  absl::StrCat("-DLS_MIN_BLOCKS=", shape.min_blocks)};
  spec.kernel_name = "lombscargle";
  return spec;
}

absl::StatusOr<cudaKernel_t> PeriodogramKernel(DeviceContext& device, ElementType dtype,
                                               const CudaKernelShape& shape) {
  // The tag names every parameter of the spec (the sources are embedded in the binary), so
  // the cache can skip building and hashing the spec after the first lookup.
  const std::string tag = absl::StrCat("lombscargle/", ElementName(dtype), "/", shape.block,
                                       "/", shape.k, "/", shape.tile, "/", shape.min_blocks);
  return device.kernels().GetTagged(tag, [&] { return LombScargleKernelSpec(dtype, shape); });
}

absl::Status WarmUpPeriodogram(DeviceContext& device) {
  // Every slot at once, so that each stream and its staging buffers get their first use here.
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < device.num_streams(); ++i) slots.push_back(device.AcquireSlot());
  absl::Status status;
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    auto request = std::make_shared<Request>();
    request->dtype = dtype;
    SeriesSpec s;
    s.t = {0.0, 0.3, 1.1, 1.7};
    s.y = {1.0, -0.5, 0.25, 2.0};
    s.grid.uniform = UniformGrid{0.1, 0.1, 16};
    // The other paths too: nterms > 1 direct and the fast method (its first transform).
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
      options.plan.shape = &shape;
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

// A fast series' device deconvolution table (NufftCorrection), cached per slot: `modes`
// doubles from the device's stream-ordered pool, freed in the slot's stream order once the
// cache has retired it (after the work that read it).
struct NufftCorrectionTable {
  double* values = nullptr;
  cudaStream_t stream = nullptr;
  NufftCorrectionTable() = default;
  NufftCorrectionTable(const NufftCorrectionTable&) = delete;
  NufftCorrectionTable& operator=(const NufftCorrectionTable&) = delete;
  ~NufftCorrectionTable() {
    if (values != nullptr) (void)cudaFreeAsync(values, stream);
  }
};

// The table of `plan` on the slot: cached, or evaluated on the device from the quadrature
// passed as the kernel's argument (no allocation but the pool's, no copy from the host).
absl::StatusOr<const double*> NufftCorrectionOnDevice(DeviceContext& device, StreamSlot& slot,
                                                      const NufftPlan& plan) {
  const std::string key = absl::StrCat("nufft-correction/", plan.modes, "/", plan.grid_size, "/",
                                       plan.width, "/", plan.beta);
  if (auto* table = slot.cache.Find<NufftCorrectionTable>(key)) return table->values;
  const NufftQuadrature quad = NufftCorrectionQuadrature(plan);
  kernels::NufftCorrectionNodes nodes;
  if (quad.x.size() > static_cast<size_t>(kernels::kMaxCorrectionNodes)) {
    return absl::InternalError(absl::StrCat("NUFFT correction: ", quad.x.size(), " nodes"));
  }
  nodes.count = static_cast<int>(quad.x.size());
  std::copy(quad.x.begin(), quad.x.end(), nodes.x);
  std::copy(quad.weight_phi.begin(), quad.weight_phi.end(), nodes.weight_phi);
  const cudaStream_t stream = slot.stream.get();
  auto table = std::make_unique<NufftCorrectionTable>();
  table->stream = stream;
  void* values = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&values, std::max<int64_t>(plan.modes, 1) * sizeof(double),
                                               device.memory_pool(), stream));
  table->values = static_cast<double*>(values);
  CUDA_RETURN_IF_ERROR(kernels::LaunchNufftCorrection(nodes, plan.modes, plan.centre,
                                                      plan.grid_size, plan.width, table->values,
                                                      stream));
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  ASSIGN_OR_RETURN(NufftCorrectionTable * stored, slot.cache.Insert(key, std::move(table), stream));
  return stored->values;
}

// The staging buffer's sections, typed (InputLayout's offsets from `base`).
struct StagingTables {
  explicit StagingTables(char* base, const InputLayout& l, size_t n_series)
      : base(base),
        desc(reinterpret_cast<LsSeriesDesc*>(base + l.desc)),
        work(reinterpret_cast<LsBlockWork*>(base + l.work)),
        begins(reinterpret_cast<long long*>(base + l.seg)),
        ends(begins + n_series),
        pdesc(reinterpret_cast<kernels::ProductSeriesDesc*>(base + l.pdesc)),
        hdesc(reinterpret_cast<kernels::HarmonicDirectDesc*>(base + l.hdesc)),
        hwork(reinterpret_cast<LsBlockWork*>(base + l.hwork)),
        ndesc(reinterpret_cast<kernels::NufftSeriesDesc*>(base + l.ndesc)),
        ntrans(reinterpret_cast<kernels::NufftTransform*>(base + l.ntrans)),
        topk(reinterpret_cast<kernels::TopPeaksDesc*>(base + l.topk)),
        t(reinterpret_cast<double*>(base + l.t)),
        freqs(reinterpret_cast<double*>(base + l.freqs)) {}
  char* base;
  LsSeriesDesc* desc;
  LsBlockWork* work;
  long long* begins;
  long long* ends;
  kernels::ProductSeriesDesc* pdesc;
  kernels::HarmonicDirectDesc* hdesc;
  LsBlockWork* hwork;
  kernels::NufftSeriesDesc* ndesc;
  kernels::NufftTransform* ntrans;
  kernels::TopPeaksDesc* topk;
  double* t;
  double* freqs;
};

// A fast series' NUFFT descriptor and its transforms' entries.
void WriteNufftDesc(const BatchPlan& p, size_t i, const LsSeriesDesc& d, long long out_offset,
                    int64_t grid_at, int64_t window_at, int& transform_at, StagingTables& tables) {
  const SeriesSpec& s = *p.series[i];
  const int64_t nf = s.grid.size();
  const int fi = p.kind_index[i];
  const NufftPlan& plan = p.nufft_plans[fi];
  const std::vector<HarmonicTerm>& terms = p.nufft_terms[fi];
  kernels::NufftSeriesDesc& n = tables.ndesc[fi];
  n = kernels::NufftSeriesDesc{};
  n.sample_offset = d.sample_offset;
  n.grid_offset = grid_at;
  n.grid_size = plan.grid_size;
  n.modes = plan.modes;
  n.centre = plan.centre;
  n.out_offset = out_offset;
  n.peak_offset = p.partial_begin[i];
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
    tables.ntrans[transform_at++] =
        kernels::NufftTransform{fi, terms[k].j, terms[k].weighted_y ? 1 : 0, 0};
  }
  n.window = p.nufft_windows[fi];
  n.low = p.nufft_low[fi];
  n.window_offset = window_at;
  n.two_over_m = 2.0 / static_cast<double>(plan.grid_size);
  if (n.window > 0) {
    const int64_t copies = plan.grid_size / n.window;
    n.q_min = FloorDiv(-plan.centre, copies);
    n.q_count = FloorDiv(nf - 1 - plan.centre, copies) - n.q_min + 1;
  }
}

// Offsets first (cheap, serial): each series' descriptors, where its power goes and its
// partial-peak range. Power that is copied back comes first in the output, then the peaks and
// the top-k peaks found on the device. Power not copied back is written to device scratch after
// them where it is read (device top-k) or always written (the NVRTC kernel's nterms = 1 direct
// series), else not at all.
void PackDescriptors(BatchPlan& p, StagingTables& tables, PendingPeriodogram& pending, int elem) {
  const size_t scratch_at = p.out_bytes / elem;
  int64_t sample_at = 0, freq_at = 0, copied_at = 0, scratch_offset = 0, grid_at = 0, window_at = 0;
  int64_t top_peaks_at = 0, top_peaks_entry = 0;
  int transform_at = 0;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const SeriesSpec& s = *p.series[i];
    const int64_t nf = s.grid.size();
    LsSeriesDesc& d = tables.desc[i];
    d = LsSeriesDesc{};
    d.sample_offset = sample_at;
    d.n_freq = nf;
    d.n_samples = static_cast<int>(s.t.size());
    d.explicit_offset = s.grid.uniform ? -1 : freq_at;
    const PowerPlan& plan = p.power_plans[i];
    if (plan.copied) {
      pending.out_offsets[i] = copied_at;
      d.out_offset = copied_at;
      copied_at += nf;
    } else {
      d.out_offset = static_cast<long long>(scratch_at) + scratch_offset;
      if (p.kinds[i] == SeriesKind::kDirect1 || plan.device_top_k > 0) scratch_offset += nf;
    }
    if (plan.device_top_k > 0) {
      tables.topk[top_peaks_at++] =
          kernels::TopPeaksDesc{d.out_offset, nf, top_peaks_entry, plan.device_top_k, 0};
      pending.top_peaks[i] = top_peaks_entry;
      pending.top_peaks_k[i] = plan.device_top_k;
      top_peaks_entry += plan.device_top_k;
    }
    // The nvcc kernels skip -1.
    const long long out_offset = plan.copied || plan.device_top_k > 0 ? d.out_offset : -1;
    tables.begins[i] = p.partial_begin[i];
    tables.ends[i] = p.partial_begin[i] + p.partial_count[i];
    if (p.product_first[i] >= 0) {
      for (size_t q = p.product_first[i]; q < p.pieces.size() && p.piece_series[q] == static_cast<int>(i); ++q) {
        p.pieces[q].sample_offset = sample_at;
        p.pieces[q].out_offset = out_offset;
      }
    }
    if (p.kinds[i] == SeriesKind::kHarmonicDirect) {
      kernels::HarmonicDirectDesc& h = tables.hdesc[p.kind_index[i]];
      h = kernels::HarmonicDirectDesc{};
      h.sample_offset = sample_at;
      h.n_freq = nf;
      h.explicit_offset = d.explicit_offset;
      h.out_offset = out_offset;
      h.peak_offset = p.partial_begin[i];
      h.f0 = s.grid.uniform ? s.grid.uniform->f0 : 0;
      h.df = s.grid.uniform ? s.grid.uniform->df : 0;
      h.n_samples = d.n_samples;
      h.nterms = s.nterms;
      h.fit_mean = s.fit_mean ? 1 : 0;
      h.normalization = static_cast<int>(s.normalization);
    } else if (p.kinds[i] == SeriesKind::kFast) {
      WriteNufftDesc(p, i, d, out_offset, grid_at, window_at, transform_at, tables);
      const kernels::NufftSeriesDesc& n = tables.ndesc[p.kind_index[i]];
      grid_at += n.grid_size * n.n_transforms;
      window_at += n.window * n.n_transforms;
    }
    sample_at += d.n_samples;
    if (!s.grid.uniform) freq_at += nf;
  }
  // The nterms > 1 direct work table, grouped by nterms (one launch per group).
  int64_t at = 0;
  for (int i : p.harmonic_order) {
    for (int64_t c = 0; c < p.partial_count[i]; ++c) {
      tables.hwork[at++] = LsBlockWork{p.kind_index[i], static_cast<int>(c), 0, 1, 0, 0, 0, -1};
    }
  }
}

// Then the per-sample work, on several threads when the batch is large (each series writes
// only its own ranges): the samples, the NVRTC kernel's work items, the pieces' scales.
void PackSamples(BatchPlan& p, StagingTables& tables, bool f32) {
  const InputLayout& layout = p.layout;
  char* base = tables.base;
  ParallelFor(static_cast<int64_t>(p.series.size()), p.samples, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const SeriesSpec& s = *p.series[i];
      const SeriesMoments& m = p.moments[i];
      LsSeriesDesc& d = tables.desc[i];
      d.fit_mean = s.fit_mean ? 1 : 0;
      d.normalization = static_cast<int>(s.normalization);
      d.yy = m.yy;
      d.psd_scale = 0.5 * m.inv_var_sum;
      d.t_absmax = m.t_absmax;
      if (p.kinds[i] == SeriesKind::kHarmonicDirect) {
        tables.hdesc[p.kind_index[i]].yy = d.yy;
        tables.hdesc[p.kind_index[i]].psd_scale = d.psd_scale;
      } else if (p.kinds[i] == SeriesKind::kFast) {
        tables.ndesc[p.kind_index[i]].yy = d.yy;
        tables.ndesc[p.kind_index[i]].psd_scale = d.psd_scale;
      }
      if (s.grid.uniform) {
        d.f0 = s.grid.uniform->f0;
        d.df = s.grid.uniform->df;
      } else {
        std::memcpy(tables.freqs + d.explicit_offset, s.grid.explicit_frequencies.data(),
                    s.grid.explicit_frequencies.size() * sizeof(double));
      }
      const int64_t at = d.sample_offset;
      if (f32) {
        WritePrepared(s, m, tables.t + at, reinterpret_cast<float*>(base + layout.w) + at,
                      reinterpret_cast<float*>(base + layout.wy) + at);
      } else {
        WritePrepared(s, m, tables.t + at, reinterpret_cast<double*>(base + layout.w) + at,
                      reinterpret_cast<double*>(base + layout.wy) + at);
      }
      if (p.kinds[i] == SeriesKind::kDirect1) {
        const int parts = p.split.parts[i];
        const int n = static_cast<int>(s.t.size());
        for (int64_t c = 0; c < p.partial_count[i]; ++c) {
          for (int part = 0; part < parts; ++part) {
            LsBlockWork& job = tables.work[p.split.work_begin[i] + c * parts + part];
            job.series = static_cast<int>(i);
            job.chunk = static_cast<int>(c);
            job.part = part;
            job.parts = parts;
            job.sample_begin = static_cast<int>(static_cast<int64_t>(n) * part / parts);
            job.sample_end = static_cast<int>(static_cast<int64_t>(n) * (part + 1) / parts);
            job.slot = static_cast<int>(p.partial_begin[i] + c);
            job.sums = parts > 1 ? static_cast<int>(p.split.sums_begin[i] + c * parts) : -1;
          }
        }
      }
      if (p.product_first[i] >= 0) {
        // Float32 operands carry the amplitudes scaled to at most 1 (FP16's range).
        double scale_w = 1, scale_wy = 1;
        if (f32 && p.kinds[i] == SeriesKind::kProduct) {
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
        for (size_t q = p.product_first[i]; q < p.pieces.size() && p.piece_series[q] == static_cast<int>(i); ++q) {
          p.pieces[q].scale_w = scale_w;
          p.pieces[q].scale_wy = scale_wy;
          p.pieces[q].yy = d.yy;
          p.pieces[q].psd_scale = d.psd_scale;
          p.pieces[q].fit_mean = d.fit_mean;
          p.pieces[q].normalization = d.normalization;
        }
      }
    }
  });
  if (!p.pieces.empty()) std::memcpy(tables.pdesc, p.pieces.data(), p.pieces.size() * sizeof(p.pieces[0]));
}

// Writes the batch into the slot's staging buffer (PackDescriptors, then PackSamples) and the
// pending result's offsets.
absl::Status PackBatch(BatchPlan& p, ElementType dtype, StreamSlot& slot, PendingPeriodogram& pending) {
  NVTX_RANGE("periodogram.pack");
  RETURN_IF_ERROR(slot.staging_in.Reserve(p.layout.total));
  char* base = static_cast<char*>(slot.staging_in.data());
  std::memset(base + p.layout.done, 0, p.layout.total - p.layout.done);  // completion counters
  StagingTables tables(base, p.layout, p.series.size());
  const int elem = ElementSize(dtype);
  pending.dtype = dtype;
  pending.out_offsets.assign(p.series.size(), -1);
  pending.top_peaks.assign(p.series.size(), -1);
  pending.top_peaks_k.assign(p.series.size(), 0);
  pending.peaks_offset = p.power_bytes;
  pending.top_peaks_offset = p.top_peaks_offset;
  PackDescriptors(p, tables, pending, elem);
  PackSamples(p, tables, dtype == ElementType::kFloat32);
  return absl::OkStatus();
}

// Stream-ordered device buffers of one batch, freed on the stream however the launch ends (an
// early error return too: the pool keeps what it is given back, so a leak here would be for the
// life of the process).
class BatchBuffers {
 public:
  explicit BatchBuffers(cudaStream_t stream) : stream_(stream) {}
  ~BatchBuffers() {
    for (void* p : {in, out, grid, windows, product}) {
      if (p != nullptr) cudaFreeAsync(p, stream_);
    }
  }
  BatchBuffers(const BatchBuffers&) = delete;
  BatchBuffers& operator=(const BatchBuffers&) = delete;

  absl::Status Allocate(const BatchPlan& p, DeviceContext& device) {
    CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&in, p.layout.total, device.memory_pool(), stream_));
    CUDA_RETURN_IF_ERROR(
        cudaMallocFromPoolAsync(&out, p.device_out_bytes, device.memory_pool(), stream_));
    if (p.grid_bytes > 0) {
      CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&grid, p.grid_bytes, device.memory_pool(), stream_));
    }
    if (p.window_bytes > 0) {
      CUDA_RETURN_IF_ERROR(
          cudaMallocFromPoolAsync(&windows, p.window_bytes, device.memory_pool(), stream_));
    }
    if (p.product_scratch.total > 0) {
      CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&product, p.product_scratch.total,
                                                   device.memory_pool(), stream_));
    }
    return absl::OkStatus();
  }

  void* in = nullptr;
  void* out = nullptr;
  void* grid = nullptr;
  void* windows = nullptr;
  void* product = nullptr;

 private:
  const cudaStream_t stream_;
};

// What every launch of a batch reads and writes on the device.
struct BatchArgs {
  BatchArgs(const BatchPlan& p, const BatchBuffers& buffers)
      : in(static_cast<char*>(buffers.in)),
        t(reinterpret_cast<const double*>(in + p.layout.t)),
        w(in + p.layout.w),
        wy(in + p.layout.wy),
        freqs(reinterpret_cast<const double*>(in + p.layout.freqs)),
        power(buffers.out),
        partials(reinterpret_cast<LsPeak*>(static_cast<char*>(buffers.out) + p.partials_at)),
        pdesc(reinterpret_cast<const kernels::ProductSeriesDesc*>(in + p.layout.pdesc)) {}
  char* in;
  const double* t;
  const void* w;
  const void* wy;
  const double* freqs;
  void* power;
  LsPeak* partials;
  const kernels::ProductSeriesDesc* pdesc;
};

// The NVRTC kernel: every nterms = 1 direct series of the batch in one launch.
absl::Status LaunchDirect1(const BatchPlan& p, const BatchBuffers& buffers, const BatchArgs& a,
                           cudaKernel_t kernel, DeviceContext& device, cudaStream_t stream) {
  if (p.split.work_items == 0) return absl::OkStatus();
  const void* a_desc = a.in + p.layout.desc;
  const void* a_work = a.in + p.layout.work;
  const double* a_t = a.t;
  const void* a_w = a.w;
  const void* a_wy = a.wy;
  const double* a_freqs = a.freqs;
  void* a_power = a.power;
  void* a_block_peaks = a.partials;
  void* a_part_sums = static_cast<char*>(buffers.out) + p.part_sums_at;
  void* a_part_done = a.in + p.layout.done;
  void* args[] = {&a_desc, &a_work,  &a_t,           &a_w,         &a_wy,
                  &a_freqs, &a_power, &a_block_peaks, &a_part_sums, &a_part_done};
  CUDA_RETURN_IF_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
                                        dim3(static_cast<unsigned>(p.split.work_items)),
                                        dim3(p.shape.block), args, 0, stream));
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  return absl::OkStatus();
}

// nterms > 1, direct: one launch per nterms.
template <typename T>
absl::Status LaunchHarmonic(const BatchPlan& p, const BatchArgs& a, DeviceContext& device,
                            cudaStream_t stream) {
  const auto* hdesc = reinterpret_cast<const kernels::HarmonicDirectDesc*>(a.in + p.layout.hdesc);
  const auto* hwork = reinterpret_cast<const LsBlockWork*>(a.in + p.layout.hwork);
  int64_t blocks_before = 0;  // hwork entries of the groups already launched
  for (size_t g = 0; g < p.harmonic_order.size();) {
    const int q = p.series[p.harmonic_order[g]]->nterms;
    int64_t blocks = 0;
    size_t e = g;
    for (; e < p.harmonic_order.size() && p.series[p.harmonic_order[e]]->nterms == q; ++e) {
      blocks += p.partial_count[p.harmonic_order[e]];
    }
    if (blocks > 0) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchHarmonicDirect<T>(
          q, hdesc, hwork + blocks_before, static_cast<int>(blocks), a.t,
          static_cast<const T*>(a.w), static_cast<const T*>(a.wy), a.freqs,
          static_cast<T*>(a.power), a.partials, stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    blocks_before += blocks;
    g = e;
  }
  return absl::OkStatus();
}

// Fast: spread every transform, FFT each series' transforms (one batched plan), power (and the
// low piece's frequencies in the same launch).
template <typename T>
absl::Status LaunchFast(const BatchPlan& p, const BatchBuffers& buffers, const BatchArgs& a,
                        ElementType dtype, DeviceContext& device, StreamSlot& slot) {
  if (p.n_transforms == 0) return absl::OkStatus();
  const cudaStream_t stream = slot.stream.get();
  const size_t elem = sizeof(T);
  const auto* ndesc = reinterpret_cast<const kernels::NufftSeriesDesc*>(a.in + p.layout.ndesc);
  const auto* ntrans = reinterpret_cast<const kernels::NufftTransform*>(a.in + p.layout.ntrans);
  const auto* host_ndesc = reinterpret_cast<const kernels::NufftSeriesDesc*>(
      static_cast<char*>(slot.staging_in.data()) + p.layout.ndesc);
  // Zero what the spreading adds into: the windows, and the full grids of the other series (a
  // windowed series' grid is written whole by its expansion).
  if (p.window_bytes > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffers.windows, 0, p.window_bytes, stream));
  }
  for (int fi = 0; fi < p.n_fast; ++fi) {
    const kernels::NufftSeriesDesc& h = host_ndesc[fi];
    if (h.window == 0 && h.n_transforms > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<char*>(buffers.grid) + h.grid_offset * 2 * elem, 0,
                                           static_cast<size_t>(h.grid_size * h.n_transforms) * 2 * elem,
                                           stream));
    }
  }
  CUDA_RETURN_IF_ERROR(kernels::LaunchNufftSpread<T>(
      ndesc, ntrans, static_cast<int>(p.n_transforms), static_cast<int>(p.max_fast_samples), a.t,
      static_cast<const T*>(a.w), static_cast<const T*>(a.wy), static_cast<T*>(buffers.grid),
      static_cast<T*>(buffers.windows), stream));
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  for (int fi = 0; fi < p.n_fast; ++fi) {
    const NufftPlan& plan = p.nufft_plans[fi];
    const kernels::NufftSeriesDesc& h = host_ndesc[fi];
    if (h.n_transforms == 0) continue;
    // Windowed: R twiddled copies of each window, FFTs of L points; else FFTs of M points.
    const int64_t fft_size = h.window > 0 ? h.window : plan.grid_size;
    const int64_t fft_batch = h.n_transforms * (plan.grid_size / fft_size);
    if (h.window > 0) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchNufftExpand<T>(
          ndesc, fi, h, static_cast<const T*>(buffers.windows), static_cast<T*>(buffers.grid), stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    // The transforms run on the slot's plans made at start (FftPlans); the table is cached
    // per slot (built on first use, on this stream; a lookup may evict older tables, kept
    // until the stream passes this point, but not the one just used).
    RETURN_IF_ERROR(slot.ffts->Inverse(dtype, fft_size, fft_batch,
                                       static_cast<T*>(buffers.grid) + 2 * h.grid_offset, stream,
                                       device.memory_pool()));
    ASSIGN_OR_RETURN(const double* correction, NufftCorrectionOnDevice(device, slot, plan));
    kernels::NufftLowPiece<T> low;
    if (p.nufft_low_piece[fi] >= 0) {
      low = {a.pdesc, p.nufft_low_piece[fi], a.t, static_cast<const T*>(a.w),
             static_cast<const T*>(a.wy)};
    }
    CUDA_RETURN_IF_ERROR(kernels::LaunchNufftPower<T>(ndesc, fi, h, static_cast<const T*>(buffers.grid),
                                                      correction, static_cast<T*>(a.power),
                                                      a.partials, low, stream));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  }
  return absl::OkStatus();
}

// The product form's operands and two GEMMs of one chunk of a piece's samples, accumulating
// over chunks (beta 0 on the first).
absl::Status LaunchProductChunk(const BatchArgs& a, const kernels::ProductSeriesDesc& piece,
                                int index, int first, void* const scratch[6],
                                cublasHandle_t blas, bool f32, cudaStream_t stream) {
  void* b1 = scratch[0];
  void* b2 = scratch[1];
  void* a1 = scratch[2];
  void* a2 = scratch[3];
  void* c1 = scratch[4];
  void* c2 = scratch[5];
  const int m = 2 * piece.j;
  const int n = std::min(kernels::kProductChunk, piece.n_samples - first);
  const int k = kernels::ProductChunkK(n, f32);
  if (f32) {
    CUDA_RETURN_IF_ERROR(kernels::LaunchProductOperandsF16(
        a.pdesc, index, piece, first, n, k, a.t, static_cast<const float*>(a.w),
        static_cast<const float*>(a.wy), b1, b2, a1, a2, stream));
    // The correction products (hi lo + lo hi, K = 2n, small) first, then the main product
    // (hi hi, K = n) onto them: the tensor cores' accumulation truncates at each k step, so
    // the big sums see only the n / 16 steps of the main product.
    const int seg = k / 3;
    const float one = 1, beta = first == 0 ? 0.f : 1.f;
    auto gemm = [&](int cols, const void* b, const void* at, void* c, int kk, float bt) {
      return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, cols, kk, &one, b, CUDA_R_16F, m, at,
                          CUDA_R_16F, k, &bt, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    };
    const auto* b1h = static_cast<const __half*>(b1);
    const auto* b2h = static_cast<const __half*>(b2);
    const auto* a1h = static_cast<const __half*>(a1);
    const auto* a2h = static_cast<const __half*>(a2);
    const int64_t b_seg = static_cast<int64_t>(m) * seg;  // one segment of B's columns
    CUBLAS_RETURN_IF_ERROR(gemm(4 * piece.rows, b1h + b_seg, a1h + seg, c1, 2 * seg, beta));
    CUBLAS_RETURN_IF_ERROR(gemm(4 * piece.rows, b1h, a1h, c1, seg, 1.f));
    CUBLAS_RETURN_IF_ERROR(gemm(2 * piece.rows, b2h + b_seg, a2h + seg, c2, 2 * seg, beta));
    CUBLAS_RETURN_IF_ERROR(gemm(2 * piece.rows, b2h, a2h, c2, seg, 1.f));
    return absl::OkStatus();
  }
  CUDA_RETURN_IF_ERROR(kernels::LaunchProductOperandsF64(
      a.pdesc, index, piece, first, n, k, a.t, static_cast<const double*>(a.w),
      static_cast<const double*>(a.wy), static_cast<double*>(b1), static_cast<double*>(b2),
      static_cast<double*>(a1), static_cast<double*>(a2), stream));
  const double one = 1, beta = first == 0 ? 0.0 : 1.0;
  CUBLAS_RETURN_IF_ERROR(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 4 * piece.rows, k, &one,
                                     static_cast<const double*>(b1), m,
                                     static_cast<const double*>(a1), k, &beta,
                                     static_cast<double*>(c1), m));
  CUBLAS_RETURN_IF_ERROR(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 2 * piece.rows, k, &one,
                                     static_cast<const double*>(b2), m,
                                     static_cast<const double*>(a2), k, &beta,
                                     static_cast<double*>(c2), m));
  return absl::OkStatus();
}

// Product form: per piece, per chunk of samples the operands and two GEMMs (accumulating over
// chunks), then the power. Direct low pieces of fast series run with their power launch.
template <typename T>
absl::Status LaunchProducts(const BatchPlan& p, const BatchBuffers& buffers, const BatchArgs& a,
                            DeviceContext& device, StreamSlot& slot) {
  const cudaStream_t stream = slot.stream.get();
  const bool f32 = std::is_same_v<T, float>;
  const auto& sizes = p.product_scratch;
  char* base = static_cast<char*>(buffers.product);
  void* const scratch[6] = {base,
                            base + sizes.b,
                            base + 2 * sizes.b,
                            base + 2 * sizes.b + sizes.a1,
                            base + 2 * sizes.b + sizes.a1 + sizes.a2,
                            base + 2 * sizes.b + sizes.a1 + sizes.a2 + sizes.c1};
  const cublasHandle_t blas = slot.cublas.get();
  for (size_t pi = 0; pi < p.pieces.size(); ++pi) {
    const kernels::ProductSeriesDesc& piece = p.pieces[pi];
    const int index = static_cast<int>(pi);
    if (piece.direct) {
      if (p.kinds[p.piece_series[pi]] == SeriesKind::kFast) continue;  // run by the power launch
      CUDA_RETURN_IF_ERROR((kernels::LaunchProductLow<T>(
          a.pdesc, index, piece, a.t, static_cast<const T*>(a.w), static_cast<const T*>(a.wy),
          static_cast<T*>(a.power), a.partials, stream)));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
      continue;
    }
    for (int first = 0; first < piece.n_samples; first += kernels::kProductChunk) {
      RETURN_IF_ERROR(LaunchProductChunk(a, piece, index, first, scratch, blas, f32, stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    CUDA_RETURN_IF_ERROR((kernels::LaunchProductPower<T, T>(
        a.pdesc, index, piece, static_cast<const T*>(scratch[4]), static_cast<const T*>(scratch[5]),
        static_cast<T*>(a.power), a.partials, stream)));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  }
  return absl::OkStatus();
}

// Each series' peak from its partial peaks, then the top-k peaks found on the device.
template <typename T>
absl::Status LaunchPeaks(const BatchPlan& p, const BatchBuffers& buffers, const BatchArgs& a,
                         DeviceContext& device, cudaStream_t stream) {
  const auto* begins = reinterpret_cast<const long long*>(a.in + p.layout.seg);
  const int n_series = static_cast<int>(p.series.size());
  auto* peaks = reinterpret_cast<LsPeak*>(static_cast<char*>(buffers.out) + p.power_bytes);
  CUDA_RETURN_IF_ERROR(kernels::LaunchReducePeaks(a.partials, begins, begins + n_series, n_series,
                                                  peaks, stream));
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  if (p.top_peaks_series > 0) {
    const auto* descs = reinterpret_cast<const kernels::TopPeaksDesc*>(a.in + p.layout.topk);
    auto* top = reinterpret_cast<LsPeak*>(static_cast<char*>(buffers.out) + p.top_peaks_offset);
    CUDA_RETURN_IF_ERROR(kernels::LaunchTopPeaks(static_cast<const T*>(a.power), descs,
                                                 static_cast<int>(p.top_peaks_series), top, stream));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  }
  return absl::OkStatus();
}

// Every computation path of the batch, then the peaks, in the compute type T.
template <typename T>
absl::Status LaunchBatch(const BatchPlan& p, const BatchBuffers& buffers, cudaKernel_t kernel,
                         ElementType dtype, DeviceContext& device, StreamSlot& slot) {
  const cudaStream_t stream = slot.stream.get();
  if (p.n_transforms > 0 && slot.ffts == nullptr) {  // before anything is launched
    return absl::FailedPreconditionError("a fast series on a device context made without FFT plans");
  }
  const BatchArgs a(p, buffers);
  RETURN_IF_ERROR(LaunchDirect1(p, buffers, a, kernel, device, stream));
  RETURN_IF_ERROR(LaunchHarmonic<T>(p, a, device, stream));
  RETURN_IF_ERROR(LaunchFast<T>(p, buffers, a, dtype, device, slot));
  RETURN_IF_ERROR(LaunchProducts<T>(p, buffers, a, device, slot));
  return LaunchPeaks<T>(p, buffers, a, device, stream);
}

}  // namespace

// Plan (host arithmetic), pack into the slot's staging buffer, allocate the batch's device
// buffers, copy in, launch every path and the peaks, copy out: all on the slot's stream.
absl::StatusOr<PendingPeriodogram> EnqueuePeriodogram(DeviceContext& device, StreamSlot& slot,
                                                      const Batch& batch,
                                                      const EnqueueOptions* options) {
  RETURN_IF_ERROR(device.MakeCurrent());
  const cudaStream_t stream = slot.stream.get();
  const int multiprocessors = device.description().multiprocessors;
  ASSIGN_OR_RETURN(BatchPlan plan,
                   PlanBatch(batch, options ? options->plan : PlanOptions{}, multiprocessors));
  cudaKernel_t kernel = nullptr;
  if (!plan.direct1.empty()) {
    ASSIGN_OR_RETURN(kernel, PeriodogramKernel(device, batch.dtype, plan.shape));
  }
  PendingPeriodogram pending;
  RETURN_IF_ERROR(PackBatch(plan, batch.dtype, slot, pending));
  RETURN_IF_ERROR(slot.staging_out.Reserve(plan.out_bytes));
  BatchBuffers buffers(stream);  // freed after the copy out, in stream order
  RETURN_IF_ERROR(buffers.Allocate(plan, device));
  {
    NVTX_RANGE("periodogram.copy_in");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers.in, slot.staging_in.data(), plan.layout.total,
                                         cudaMemcpyHostToDevice, stream));
  }
  {
    NVTX_RANGE("periodogram.kernel");
    if (options && options->before) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->before, stream));
    RETURN_IF_ERROR(batch.dtype == ElementType::kFloat32
                        ? LaunchBatch<float>(plan, buffers, kernel, batch.dtype, device, slot)
                        : LaunchBatch<double>(plan, buffers, kernel, batch.dtype, device, slot));
    if (options && options->after) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->after, stream));
  }
  {
    NVTX_RANGE("periodogram.copy_out");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.staging_out.data(), buffers.out, plan.out_bytes,
                                         cudaMemcpyDeviceToHost, stream));
  }
  return pending;
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
