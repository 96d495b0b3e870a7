// The periodogram's tuning: the thresholds that choose between its CUDA paths and their
// shapes, in one place (as CUB keeps its policies). The measurements behind each are in
// docs/design/periodogram.md.
#pragma once

#include <cstdint>

namespace gpucompute::periodogram {

// The NVRTC kernel sums a chunk of a series in several blocks ("parts") when the batch has too
// few chunks to fill the GPU; a part takes at least this many samples.
constexpr int64_t kMinPartSamples = 64;

// The product form (kernels/lombscargle_product.cuh): at most kProductPiece frequencies a
// piece (the products hold 12 values per frequency).
constexpr int64_t kProductPiece = int64_t{1} << 22;
// Auto: below these the NVRTC kernel (one launch for the whole batch) is as fast. On the H200
// the products run the 1,024 x 1M problem in ~1/2 (float64) to ~1/3 (float32) of its time.
constexpr double kProductMinPairs = double{1 << 26};
constexpr int64_t kProductMinFrequencies = int64_t{1} << 14;

// Float32 operands are FP16 (hi + lo) scaled by the series' largest weight: below FP16's
// normal range (6e-5 of it) an operand keeps only 3e-8 of the scale, so weights spread more
// than this (dy more than 32 times apart) stay with the direct kernel.
constexpr double kProductMaxWeightRatio = 1024;

}  // namespace gpucompute::periodogram
