// x^(-1/2) of a symmetric positive definite matrix applied to a vector without its
// eigendecomposition: Zolotarev's best relative rational approximation on [1, b] in partial
// fractions, r(x) = d0 + sum_l w_l / (x + p_l) with every p_l, w_l > 0, so that for a matrix
// G >= I whose spectrum lies in [1, b], r(G) v = d0 v + sum_l w_l (G + p_l I)^-1 v is within
// `error` (relative, <= 2e-15) of G^-1/2 v in the 2-norm, and every term is a positive
// combination of well-conditioned solves (no cancellation). The LETKF's GPU kernel takes
// (N-1)^(1/2) G^-1/2 this way, where G's tridiagonal form makes each solve O(N).
//
// The coefficients (math/inverse_sqrt_table.h) come from scripts/generate-inverse-sqrt-table.py
// (mpmath at 50 digits) for b = 10, 100, ..., 1e16: 1e4 takes 19 terms, 1e16 about 90.
// Header-only, host and device.
#pragma once

#include <cstddef>

#include "math/host_device.h"
#include "math/inverse_sqrt_table.h"

namespace gpucompute::inverse_sqrt {

// The table as one array of doubles, the layout the device reads: per rung its bound, d0, first
// term and term count (kRungs each), then the poles and the weights (kTerms each).
inline constexpr size_t kTableDoubles = 4 * kRungs + 2 * kTerms;

inline void WriteTable(double* out) {
  for (int k = 0; k < kRungs; ++k) {
    out[k] = kRungTable[k].bound;
    out[kRungs + k] = kRungTable[k].d0;
    out[2 * kRungs + k] = kRungTable[k].first;
    out[3 * kRungs + k] = kRungTable[k].count;
  }
  for (int t = 0; t < kTerms; ++t) {
    out[4 * kRungs + t] = kPoles[t];
    out[4 * kRungs + kTerms + t] = kWeights[t];
  }
}

// One rung of a table written by WriteTable.
struct Rung {
  double d0 = 1;
  const double* poles = nullptr;
  const double* weights = nullptr;
  int count = 0;
};

// The lowest rung whose interval [1, bound] holds `bound` (the top one beyond 1e16, where the
// approximation's error grows).
GPUCOMPUTE_HOST_DEVICE inline Rung SelectRung(const double* table, double bound) {
  int k = 0;
  while (k + 1 < kRungs && table[k] < bound) ++k;
  Rung r;
  r.d0 = table[kRungs + k];
  const int first = static_cast<int>(table[2 * kRungs + k]);
  r.count = static_cast<int>(table[3 * kRungs + k]);
  r.poles = table + 4 * kRungs + first;
  r.weights = table + 4 * kRungs + kTerms + first;
  return r;
}

// r(x) for a scalar x >= 1 (tests).
GPUCOMPUTE_HOST_DEVICE inline double Evaluate(const Rung& r, double x) {
  double s = r.d0;
  for (int l = 0; l < r.count; ++l) s += r.weights[l] / (x + r.poles[l]);
  return s;
}

}  // namespace gpucompute::inverse_sqrt
