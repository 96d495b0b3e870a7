// The layout the periodogram kernels read: shared by the host packer (C++) and the NVRTC
// kernel, so it uses only built-in types (NVRTC has no standard headers).
#pragma once

namespace gpucompute_kernels {

// One series of a batch. Samples live at [sample_offset, sample_offset + n_samples) of the
// t / w / wy arrays, power at [out_offset, out_offset + n_freq) of the output.
struct LsSeriesDesc {
  long long sample_offset;
  long long out_offset;
  long long n_freq;
  long long explicit_offset;  // into the explicit-frequency array; -1 for a uniform grid
  double f0;                  // uniform grid: f_k = f0 + k * df
  double df;
  double yy;                  // sum w y^2
  double psd_scale;           // sum(dy^-2) / 2
  double t_absmax;            // max |t| (t as packed, relative to the reference sample)
  int n_samples;
  int fit_mean;               // 0 or 1
  int normalization;          // 0 standard, 1 model, 2 log, 3 psd
  int pad;
};

// One thread block's work: a series and which chunk of its frequencies (the harmonic kernel
// reads only these two). The NVRTC kernel also reads the samples the block sums: the whole
// series, or one of `parts` ranges of it when a small batch would leave most multiprocessors
// idle; the last of a chunk's blocks to finish then adds the parts' sums (in part order, so
// the result does not depend on which finished last) and writes the power.
struct LsBlockWork {
  int series;
  int chunk;
  int part;          // which sample range; 0 of parts
  int parts;         // 1: the block sums every sample and needs no other
  int sample_begin;  // the range, within the series
  int sample_end;
  int slot;          // the chunk's index in the batch: its partial peak, its completion counter
  int sums;          // parts > 1: the chunk's first row in the part-sum table
};

// The largest non-NaN power of a range of frequencies and its index within the series
// (index -1: every value was NaN). Each block of the periodogram kernel writes one; the
// peak-reduction kernel combines a series' blocks.
struct LsPeak {
  long long index;
  double value;
};

}  // namespace gpucompute_kernels
