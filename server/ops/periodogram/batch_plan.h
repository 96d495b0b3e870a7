// The plan of a periodogram batch on the GPU (PlanBatch): which path each series takes, its
// partial peaks, the product pieces and NUFFT plans, the staging buffer's layout and the size
// of every device buffer. Host arithmetic only, no CUDA call: EnqueuePeriodogram
// (cuda_periodogram.cc) packs, allocates and launches from it, and tests check it without a
// GPU. The thresholds it applies are in tuning.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/lombscargle_product.cuh"
#include "server/ops/periodogram/nufft.h"
#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {

// Kernel shape of the NVRTC direct kernel: threads per block, frequencies per thread, samples
// per shared-memory tile.
struct CudaKernelShape {
  int block = 128;
  int k = 8;
  int tile = 256;
  int min_blocks = 0;  // __launch_bounds__ minimum resident blocks per SM (0: none)
};

// The shapes the server warms at start-up and chooses from per batch.
std::vector<CudaKernelShape> DefaultKernelShapes(ElementType dtype);

// Byte offsets of the sections of the input buffer (the same on host and device).
struct InputLayout {
  size_t desc = 0, work = 0, seg = 0, hdesc = 0, hwork = 0, ndesc = 0, ntrans = 0, pdesc = 0,
         topk = 0, t = 0, w = 0, wy = 0, freqs = 0, done = 0, total = 0;
};

// How the CUDA path computes a series. kProduct: nterms = 1 direct as matrix products
// (PlanProduct).
enum class SeriesKind { kDirect1, kHarmonicDirect, kFast, kProduct };

// Where a series' power goes: back to the host, or nowhere past the device: a bootstrap
// series needs only its peak, and discarded power only its peak and top-k peaks, found on the
// device (kernels/top_peaks.cuh) unless more are wanted than it finds.
struct PowerPlan {
  bool copied = true;
  int device_top_k = 0;  // > 0: the top-k peaks are found on the device
};

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

// The product form (kernels/lombscargle_product.cuh) of an nterms = 1 direct series on a
// uniform grid, as pieces (each its own descriptor): first the lowest frequencies
// (LowFrequencyPrefix) by direct sums (LowPiece); then the rest as matrix products, at most
// kProductPiece frequencies a piece (the products hold 12 values per frequency).
struct ProductSplit {
  std::vector<kernels::ProductSeriesDesc> pieces;  // grid, J, rows, first_k, n_high, direct set
};

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// What EnqueuePeriodogram works out about a batch before it writes anything (PlanBatch): each
// series' moments and path, its range of partial peaks, the product pieces and NUFFT plans, the
// input layout and the size of every device buffer. Host arithmetic only; PackBatch completes
// the pieces' offsets and scales as it writes the staging buffer.
struct BatchPlan {
  std::vector<const SeriesSpec*> series;
  std::vector<PowerPlan> power_plans;
  std::vector<SeriesMoments> moments;
  std::vector<SeriesKind> kinds;
  std::vector<const SeriesSpec*> direct1;  // the NVRTC kernel's series
  std::vector<std::optional<ProductSplit>> products;  // per series: its pieces (kProduct)
  CudaKernelShape shape;
  // Per series: its index in its kind's table, first partial peak, partial count.
  std::vector<int> kind_index;
  std::vector<int64_t> partial_begin, partial_count;
  // Pieces (kernels/lombscargle_product.cuh) of product series and the direct low piece of
  // fast ones, grouped by series; a series' pieces take its partials from piece_partials[i] on.
  std::vector<int> product_first;  // first piece in the table, or -1
  std::vector<int64_t> piece_partials;
  std::vector<kernels::ProductSeriesDesc> pieces;
  std::vector<int> piece_series;
  std::vector<int64_t> nufft_low;            // per fast series: its low piece's size
  std::vector<int> nufft_low_piece;          // per fast series: the piece's index, or -1
  std::vector<NufftPlan> nufft_plans;        // per fast series
  std::vector<std::vector<HarmonicTerm>> nufft_terms;
  std::vector<int64_t> nufft_windows;        // per fast series: L, or 0 (full grid)
  std::vector<int> harmonic_order;           // harmonic series, by nterms
  int64_t samples = 0, explicit_freqs = 0;
  int64_t n_blocks = 0, harmonic_blocks = 0, total_partials = 0, copied_freqs = 0, scratch_freqs = 0;
  int64_t top_peaks_series = 0, top_peaks_entries = 0;  // found on the device
  int64_t grid_cells = 0, window_cells = 0, n_transforms = 0, max_fast_samples = 0;
  SampleParts split;  // how the NVRTC kernel's chunks are summed (PlanSampleParts)
  int n_harmonic = 0, n_fast = 0;
  InputLayout layout;
  // The output (bytes): power copied back, one peak per series, the device's top-k peaks
  // (out_bytes in all, copied back), then device-only scratch power, one partial peak per
  // block and the part sums of chunks summed in parts.
  size_t power_bytes = 0, top_peaks_offset = 0, out_bytes = 0, partials_at = 0, part_sums_at = 0,
         device_out_bytes = 0;
  size_t grid_bytes = 0, window_bytes = 0;  // the NUFFT's grids and windows
  // The product form's operands and products, sized for the largest piece and chunk (pieces
  // run one after another on the stream and reuse them): B_1 and B_2 b bytes each.
  struct ProductScratch {
    size_t b = 0, a1 = 0, a2 = 0, c1 = 0, c2 = 0, total = 0;
  } product_scratch;
};

// Whether nterms = 1 direct series on uniform grids run as matrix products
// (kernels/lombscargle_product.cuh).
enum class ProductForm {
  kAuto,    // where large enough to gain (tuning.h)
  kNever,   // the NVRTC kernel always
  kAlways,  // whenever the grid allows (tests)
};

// The benchmark and test switches the plan honours (EnqueueOptions' subset).
struct PlanOptions {
  const CudaKernelShape* shape = nullptr;  // the NVRTC kernel's shape; null: ChooseShape's
  ProductForm product = ProductForm::kAuto;
  int64_t product_piece = 0;  // frequencies per product piece; 0: kProductPiece
};

// The windowed form's window (kernels/nufft_kernels.cuh) on a grid of M = `grid_size` cells
// (a ladder size) for points that need `need` cells: the smallest even divisor L >= need of M,
// or instead the smallest power of two that divides M and is >= need if that is at most 2 L
// (cuFFT's power-of-two sizes run faster: on the H200, 1M float64 modes, 3 transforms,
// M = 2^18 5: L = 2,560 46 us, L = 4,096 35 us); 0 when M / L < 4 (the full grid is as cheap).
int64_t NufftWindowOfGrid(int64_t grid_size, double need);

// The plan of `batch` for a device of `multiprocessors` SMs. INTERNAL when a series needs a
// NUFFT kernel wider than the spreading kernel takes.
absl::StatusOr<BatchPlan> PlanBatch(const Batch& batch, const PlanOptions& options,
                                    int multiprocessors);

}  // namespace gpucompute::periodogram
