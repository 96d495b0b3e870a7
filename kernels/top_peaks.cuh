// The k highest local maxima of each series' power, on the device (nvcc-built): what a request
// that discards its power still wants of it, without copying the power back.
#pragma once

#include <cuda_runtime.h>

#include "kernels/lombscargle_abi.cuh"

namespace gpucompute::kernels {

using gpucompute_kernels::LsPeak;

// The most peaks a series may ask of the device (its threads keep that many each); a request
// that wants more gets its power copied back and its peaks found on the host.
inline constexpr int kMaxDeviceTopPeaks = 32;

// One series: power[power_offset, power_offset + n) in, out[out_offset, out_offset + k) out.
struct TopPeaksDesc {
  long long power_offset;  // elements
  long long n;
  long long out_offset;    // LsPeak entries
  int k;                   // 1 .. kMaxDeviceTopPeaks
  int pad;
};

// For each of n_series descs: its k highest local maxima, highest first, ties to the lower
// index; entries past the last maximum have index -1. The definition is the host's
// (periodogram::TopPeaks): NaN values are skipped, a value is a local maximum when it is above
// its nearest non-NaN left neighbour and not below its nearest non-NaN right one (a plateau
// reports its first index). One block per series. T is float or double.
template <typename T>
cudaError_t LaunchTopPeaks(const T* power, const TopPeaksDesc* descs, int n_series, LsPeak* out,
                           cudaStream_t stream);

}  // namespace gpucompute::kernels
