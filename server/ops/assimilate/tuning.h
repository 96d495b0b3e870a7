// The assimilate op's tuning: the thresholds that choose between its CUDA paths, in one place
// (as CUB keeps its policies). The measurements behind them are in docs/design/assimilate.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpucompute::assimilate {

// Orders up to which potrfBatched / trsmBatched beat a loop of the plain routines (a guess
// with margin: both are built for small matrices); syevjBatched takes at most 32.
inline constexpr int64_t kMaxBatchedOrder = 128;
inline constexpr int64_t kMaxSyevjBatchedOrder = 32;

// One ensemble-space problem with many observations per member (m >= 4096 and m >= 32 N)
// splits the products' long inner dimension into kSplitChunks chunks of rows and sums the
// partial products by a GEMV (a single GEMM with K = 10^5 and a 50 x 101 output ran on a few
// SMs).
inline constexpr int64_t kSplitChunks = 128;
inline constexpr int64_t kSplitMinObservations = 4096;
inline constexpr int64_t kSplitMinObservationsPerMember = 32;

// Block of the blocked left triangular solves (see EnqueueOptions::trsm_block); measured
// on the H200 at N = 3000 (docs/design/assimilate.md): float64 one cuBLAS TRSM (3.80 ms for
// both solves, blocks of 256-1024: 4.03-4.19 ms), float32 blocks of 256 (3.05 vs 3.40 ms).
template <typename T>
inline constexpr int kDefaultTrsmBlock = std::is_same_v<T, float> ? 256 : 0;
// One large stochastic problem (N >= kMinBlockInverseOrder): G^-1 B by inverted diagonal blocks
// of this order and GEMMs (BlockInverseSolve) instead of two TRSMs.
inline constexpr int kDefaultInverseBlock = 512;
inline constexpr int64_t kMinBlockInverseOrder = 1024;

// Inputs below this are packed into the staging buffer: queueing a copy of their own costs more
// than packing them (larger ones in page-locked memory are copied where they are).
inline constexpr size_t kInPlaceMinBytes = size_t{1} << 20;

// Bytes of packed input per thread of the packing's ParallelFor: a piece costs a wake of one of
// the shared workers (microseconds) against ~0.1 ms of converting this much, so a batch of many
// small problems (64 of 40 x 20 are 0.85 MB) packs on several threads too.
inline constexpr int64_t kPackBytesPerThread = int64_t{256} << 10;

}  // namespace gpucompute::assimilate
