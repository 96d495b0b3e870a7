// The plan of a periodogram batch (see batch_plan.h).
#include "server/ops/periodogram/batch_plan.h"

#include <algorithm>
#include <cmath>

#include "common/align.h"
#include "common/nvtx.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "kernels/harmonic_direct.cuh"
#include "kernels/lombscargle_abi.cuh"
#include "kernels/nufft_kernels.cuh"
#include "kernels/top_peaks.cuh"
#include "math/fft_sizes.h"
#include "server/ops/periodogram/tuning.h"

namespace gpucompute::periodogram {
namespace {

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsPeak;
using gpucompute_kernels::LsSeriesDesc;


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
CudaKernelShape ChooseShape(ElementType dtype, const std::vector<const SeriesSpec*>& series,
                            int multiprocessors) {
  const std::vector<CudaKernelShape> shapes = DefaultKernelShapes(dtype);
  for (const CudaKernelShape& s : shapes) {
    int64_t blocks = 0;
    for (const SeriesSpec* x : series) blocks += (x->grid.size() + s.block * s.k - 1) / (s.block * s.k);
    if (blocks >= 2 * multiprocessors) return s;
  }
  return shapes.back();
}

SeriesKind KindOf(const SeriesSpec& s) {
  if (s.method == Method::kFast && s.grid.uniform) return SeriesKind::kFast;
  return s.nterms > 1 ? SeriesKind::kHarmonicDirect : SeriesKind::kDirect1;
}

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

// t_absmax: the series'
// ComputeMoments(s).t_absmax.
std::optional<ProductSplit> PlanProduct(const SeriesSpec& s, double t_absmax, ElementType dtype,
                                        ProductForm form, int64_t max_piece) {
  if (form == ProductForm::kNever || s.nterms != 1 || !s.grid.uniform || s.t.empty()) {
    return std::nullopt;
  }
  const UniformGrid& g = *s.grid.uniform;
  if (!(g.f0 >= 0) || !(g.df > 0) || g.n <= 0) return std::nullopt;
  const int64_t nf = g.n;
  const bool small = static_cast<double>(s.t.size()) * static_cast<double>(nf) < kProductMinPairs;
  const bool automatic = form == ProductForm::kAuto;
  if (automatic && (small || nf < kProductMinFrequencies)) return std::nullopt;
  if (dtype == ElementType::kFloat32 && !s.dy.empty()) {
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
  if (n_high == 0 || (automatic && n_high < kProductMinFrequencies)) return std::nullopt;
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

}  // namespace

int64_t NufftWindowOfGrid(int64_t grid_size, double need) {
  if (!(need * 4 <= static_cast<double>(grid_size))) return 0;
  // M is a ladder size (math/fft_sizes.h), so its even divisors are ladder sizes too.
  int64_t best = 0, best_p2 = 0;
  for (int64_t l : FftSizesBetween(static_cast<int64_t>(std::ceil(need)), grid_size)) {
    if (grid_size % l != 0) continue;
    if (best == 0) best = l;
    if ((l & (l - 1)) == 0) {
      best_p2 = l;
      break;
    }
  }
  if (best_p2 != 0 && best_p2 <= 2 * best) best = best_p2;
  return grid_size / best >= 4 ? best : 0;
}

namespace {

// The window for a series whose points lie within max_j * df * t_absmax cycles of 0: room for
// every point's cells with two to spare either side.
int64_t NufftWindow(const NufftPlan& plan, int max_j, double df, double t_absmax) {
  const double half = max_j * std::abs(df) * t_absmax * static_cast<double>(plan.grid_size) +
                      0.5 * plan.width + 2;
  return NufftWindowOfGrid(plan.grid_size, 2 * std::ceil(half) + 2);
}

// Each series' moments, once: planning and packing read them. Decoded series carry theirs
// (computed on the thread that received the call); the rest take a few passes here.
std::vector<SeriesMoments> BatchMoments(const std::vector<const SeriesSpec*>& series) {
  std::vector<SeriesMoments> moments(series.size());
  int64_t samples = 0;
  for (const SeriesSpec* s : series) samples += s->moments ? 0 : static_cast<int64_t>(s->t.size());
  ParallelFor(static_cast<int64_t>(series.size()), samples, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) moments[i] = MomentsOf(*series[i]);
  });
  return moments;
}

// Which path each series takes; the nterms = 1 direct ones share the NVRTC kernel.
void ChoosePaths(const Batch& batch, const PlanOptions& options, int multiprocessors,
                 BatchPlan& p) {
  const size_t n = p.series.size();
  p.kinds.resize(n);
  p.products.resize(n);
  const ProductForm product_form = options.product;
  const int64_t product_piece = options.product_piece;
  for (size_t i = 0; i < n; ++i) {
    p.kinds[i] = KindOf(*p.series[i]);
    if (p.kinds[i] != SeriesKind::kDirect1) continue;
    p.products[i] =
        PlanProduct(*p.series[i], p.moments[i].t_absmax, batch.dtype, product_form, product_piece);
    if (p.products[i]) {
      p.kinds[i] = SeriesKind::kProduct;
    } else {
      p.direct1.push_back(p.series[i]);
    }
  }
  p.shape = options.shape ? *options.shape : ChooseShape(batch.dtype, p.direct1, multiprocessors);
}

// A fast series' NUFFT plan, window and low piece, and its partial count.
absl::Status PlanFastSeries(size_t i, ElementType dtype, BatchPlan& p) {
  const SeriesSpec& s = *p.series[i];
  const int64_t nf = s.grid.size();
  p.kind_index[i] = p.n_fast++;
  p.nufft_plans.push_back(MakeNufftPlan(nf, dtype, s.nterms));
  p.nufft_terms.push_back(HarmonicTerms(s.nterms, s.fit_mean));
  const NufftPlan& plan = p.nufft_plans.back();
  const std::vector<HarmonicTerm>& terms = p.nufft_terms.back();
  if (plan.width > kernels::kNufftMaxWidth) {
    return absl::InternalError("NUFFT kernel width above the spreading kernel's limit");
  }
  // The power kernel reads the transforms in HarmonicTerms' order (pinned by the test
  // NufftTerms.OrderIsThePowerKernels).
  int max_j = 1;
  for (const HarmonicTerm& h : terms) max_j = std::max(max_j, h.j);
  const double t_absmax = p.moments[i].t_absmax;
  p.nufft_windows.push_back(nf > 0 ? NufftWindow(plan, max_j, s.grid.uniform->df, t_absmax) : 0);
  const int64_t copies = p.nufft_windows.back() > 0 ? plan.grid_size / p.nufft_windows.back() : 0;
  const int64_t q_count =
      copies > 0 ? FloorDiv(nf - 1 - plan.centre, copies) - FloorDiv(-plan.centre, copies) + 1 : 0;
  p.partial_count[i] = nf > 0 ? kernels::NufftPowerBlocks(nf, copies, q_count) : 0;
  // nterms 1: the lowest frequencies by direct sums (nufft.h), a piece of their own.
  const int64_t low = s.nterms == 1 ? LowFrequencyPrefix(*s.grid.uniform, t_absmax) : 0;
  const bool low_direct =
      static_cast<double>(low) * static_cast<double>(s.t.size()) <= kMaxLowFrequencyPairs;
  p.nufft_low.push_back(low_direct ? low : 0);
  p.nufft_low_piece.push_back(p.nufft_low.back() > 0 ? static_cast<int>(p.pieces.size()) : -1);
  if (p.nufft_low.back() > 0) {
    p.product_first[i] = static_cast<int>(p.pieces.size());
    p.piece_partials[i] = p.partial_count[i];
    p.pieces.push_back(LowPiece(s, p.nufft_low.back()));
    p.piece_series.push_back(static_cast<int>(i));
    p.partial_count[i] += kernels::ProductPartials(p.pieces.back());
  }
  if (nf > 0) {
    const auto transforms = static_cast<int64_t>(terms.size());
    p.window_cells += p.nufft_windows.back() * transforms;
    p.grid_cells += plan.grid_size * transforms;
    p.n_transforms += transforms;
    p.max_fast_samples = std::max<int64_t>(p.max_fast_samples, static_cast<int64_t>(s.t.size()));
  }
  return absl::OkStatus();
}

// Every series' partial peaks and table entries, and the batch's totals.
absl::Status CountSeriesWork(ElementType dtype, BatchPlan& p) {
  const size_t n = p.series.size();
  const int64_t per_block = static_cast<int64_t>(p.shape.block) * p.shape.k;
  p.kind_index.assign(n, -1);
  p.partial_begin.assign(n, 0);
  p.partial_count.assign(n, 0);
  p.product_first.assign(n, -1);
  p.piece_partials.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const SeriesSpec& s = *p.series[i];
    const int64_t nf = s.grid.size();
    const PowerPlan& power = p.power_plans[i];
    p.samples += static_cast<int64_t>(s.t.size());
    if (!s.grid.uniform) p.explicit_freqs += nf;
    if (power.copied) {
      p.copied_freqs += nf;
    } else if (p.kinds[i] == SeriesKind::kDirect1 || power.device_top_k > 0) {
      p.scratch_freqs += nf;  // written to device scratch (see PackDescriptors)
    }
    if (power.device_top_k > 0) {
      ++p.top_peaks_series;
      p.top_peaks_entries += power.device_top_k;
    }
    switch (p.kinds[i]) {
      case SeriesKind::kDirect1:
        p.partial_count[i] = CeilDiv(nf, per_block);
        p.n_blocks += p.partial_count[i];
        break;
      case SeriesKind::kProduct:
        p.product_first[i] = static_cast<int>(p.pieces.size());
        for (const kernels::ProductSeriesDesc& piece : p.products[i]->pieces) {
          p.pieces.push_back(piece);
          p.piece_series.push_back(static_cast<int>(i));
          p.partial_count[i] += kernels::ProductPartials(piece);
        }
        break;
      case SeriesKind::kHarmonicDirect:
        p.kind_index[i] = p.n_harmonic++;
        p.partial_count[i] = CeilDiv(nf, kernels::kHarmonicDirectBlock);
        p.harmonic_blocks += p.partial_count[i];
        p.harmonic_order.push_back(static_cast<int>(i));
        break;
      case SeriesKind::kFast:
        RETURN_IF_ERROR(PlanFastSeries(i, dtype, p));
        break;
    }
  }
  std::stable_sort(p.harmonic_order.begin(), p.harmonic_order.end(),
                   [&](int a, int b) { return p.series[a]->nterms < p.series[b]->nterms; });
  return absl::OkStatus();
}

// Partial peaks: the NVRTC kernel's blocks first (it writes partial blockIdx.x), then the other
// kernels' ranges, each series' range contiguous.
void PlacePartials(int multiprocessors, BatchPlan& p) {
  int64_t direct_at = 0, other_at = p.n_blocks;
  for (size_t i = 0; i < p.series.size(); ++i) {
    int64_t& at = p.kinds[i] == SeriesKind::kDirect1 ? direct_at : other_at;
    p.partial_begin[i] = at;
    at += p.partial_count[i];
    if (p.product_first[i] < 0) continue;
    int64_t piece_at = p.partial_begin[i] + p.piece_partials[i];
    for (size_t q = p.product_first[i]; q < p.pieces.size() && p.piece_series[q] == static_cast<int>(i); ++q) {
      p.pieces[q].peak_offset = piece_at;
      piece_at += kernels::ProductPartials(p.pieces[q]);
    }
  }
  p.total_partials = other_at;
  p.split = PlanSampleParts(p.series, p.kinds, p.partial_count, p.n_blocks, 2 * multiprocessors);
}

// The input layout and the size of every device buffer.
void SizeBuffers(ElementType dtype, BatchPlan& p) {
  const int elem = ElementSize(dtype);
  const bool f32 = dtype == ElementType::kFloat32;
  p.layout = MakeInputLayout(p.series.size(), p.split.work_items, p.samples, p.explicit_freqs, elem,
                             p.n_harmonic, p.harmonic_blocks, p.n_fast, p.n_transforms,
                             p.pieces.size(), static_cast<size_t>(p.top_peaks_series),
                             p.split.sum_rows > 0 ? static_cast<size_t>(p.n_blocks) : 0);
  p.power_bytes = AlignUp(static_cast<size_t>(p.copied_freqs) * elem);
  p.top_peaks_offset = p.power_bytes + AlignUp(p.series.size() * sizeof(LsPeak));
  p.out_bytes = p.top_peaks_offset + AlignUp(static_cast<size_t>(p.top_peaks_entries) * sizeof(LsPeak));
  p.partials_at = p.out_bytes + AlignUp(static_cast<size_t>(p.scratch_freqs) * elem);
  p.part_sums_at = AlignUp(p.partials_at + static_cast<size_t>(p.total_partials) * sizeof(LsPeak));
  const size_t part_sum_row = static_cast<size_t>(p.shape.k) * p.shape.block * 6 * elem;
  p.device_out_bytes = p.part_sums_at + static_cast<size_t>(p.split.sum_rows) * part_sum_row;
  p.grid_bytes = static_cast<size_t>(p.grid_cells) * 2 * elem;
  p.window_bytes = static_cast<size_t>(p.window_cells) * 2 * elem;
  auto& scratch = p.product_scratch;
  const size_t op = f32 ? 2 : 8, acc = f32 ? 4 : 8;
  for (const kernels::ProductSeriesDesc& piece : p.pieces) {
    if (piece.direct) continue;
    const int k = kernels::ProductChunkK(std::min(piece.n_samples, kernels::kProductChunk), f32);
    scratch.b = std::max(scratch.b, AlignUp(kernels::ProductBElements(piece.j, k) * op));
    scratch.a1 = std::max(scratch.a1, AlignUp(kernels::ProductA1Elements(piece.rows, k) * op));
    scratch.a2 = std::max(scratch.a2, AlignUp(kernels::ProductA2Elements(piece.rows, k) * op));
    scratch.c1 = std::max(scratch.c1, AlignUp(kernels::ProductC1Elements(piece.j, piece.rows) * acc));
    scratch.c2 = std::max(scratch.c2, AlignUp(kernels::ProductC2Elements(piece.j, piece.rows) * acc));
  }
  scratch.total = 2 * scratch.b + scratch.a1 + scratch.a2 + scratch.c1 + scratch.c2;  // 0: only low pieces
}

}  // namespace

std::vector<CudaKernelShape> DefaultKernelShapes(ElementType dtype) {
  // Largest work per thread first (fewest sin/cos per pair), then smaller for small batches
  // that would otherwise leave multiprocessors idle. Chosen by periodogram_bench's shape sweep
  // on the H200 (docs/design/periodogram.md).
  if (dtype == ElementType::kFloat32) {
    return {CudaKernelShape{128, 16, 256, 4}, CudaKernelShape{128, 2, 256, 0}};
  }
  return {CudaKernelShape{128, 16, 256, 0}, CudaKernelShape{128, 2, 256, 0}};
}

absl::StatusOr<BatchPlan> PlanBatch(const Batch& batch, const PlanOptions& options,
                                    int multiprocessors) {
  NVTX_RANGE("periodogram.plan");
  BatchPlan p;
  p.series = batch.all_series();
  p.power_plans = PlanPower(batch);
  p.moments = BatchMoments(p.series);
  ChoosePaths(batch, options, multiprocessors, p);
  RETURN_IF_ERROR(CountSeriesWork(batch.dtype, p));
  PlacePartials(multiprocessors, p);
  SizeBuffers(batch.dtype, p);
  return p;
}

}  // namespace gpucompute::periodogram
