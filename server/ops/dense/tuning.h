// The dense op's tuning: which layers take the few-rows kernel, in one place (as CUB keeps its
// policies); the tensor-core kernel's rule is its own (kernels::TensorCorePays). The
// measurements behind them are in docs/design/dense.md.
#pragma once

#include <cstdint>

namespace gpucompute::dense {

inline constexpr int64_t kFewRowsMaxRows = 2;
inline constexpr int64_t kFewRowsMaxBytes = int64_t{16} << 20;  // rows x weight bytes

// Whether the few-rows kernel beats normalise + cuBLASLt on a layer of `weight_bytes`
// (docs/design/dense.md): for one or two rows of a small layer, bound by reading W once with
// little else to hide behind (H200, bf16, us, few-rows vs cuBLASLt: 1024 -> 4096 one row
// 8.0 vs 12.0, two rows 10.6 vs 11.8, three 15.9 vs 11.4; 2048 -> 4096 one row 12.9 vs 15.0, two
// rows 17.7 vs 15.0; 4096 -> 4096 one row 22.2 vs 20.8). On larger layers the kernel's one load
// per lane and many waves of blocks stream at ~2 TB/s while cuBLASLt reaches 2.8-3.8
// (16384 -> 16384, one row: 245 vs 140 us).
inline bool FewRowsPays(int64_t rows, int64_t weight_bytes) {
  return rows <= kFewRowsMaxRows && rows * weight_bytes <= kFewRowsMaxBytes;
}

}  // namespace gpucompute::dense
