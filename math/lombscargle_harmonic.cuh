// Multi-harmonic Lomb-Scargle power (Astropy's nterms >= 1, "chi2" semantics) from the
// harmonic sums at one frequency: one definition for the CPU (C++) and the CUDA kernels.
//
// With normalised weights w (sum 1), phase theta_i = 2 pi f t_i and the model columns
// [1 (fit_mean only), sin(theta), cos(theta), ..., sin(q theta), cos(q theta)] (Astropy's
// design_matrix order), the normal equations X^T W X need only
//   C_j = sum w cos(j theta), S_j = sum w sin(j theta),   j = 0 .. 2q   (C_0 = 1, S_0 = 0)
// by the product-to-sum identities, and X^T W y needs
//   YC_j = sum w y cos(j theta), YS_j = sum w y sin(j theta),   j = 1 .. q
// (sum w y = 0 with fit_mean: y is centred whenever fit_mean or center_data is set).
// p = b^T A^-1 b is then the weighted sum of squares the model explains; Astropy's chi2 power
// is the same p with un-normalised weights, so the normalized powers agree exactly.
#pragma once

#include "lombscargle_math.cuh"

namespace gpucompute_kernels {

// The largest nterms the server accepts (the solve is (2 nterms + 1)^2 per frequency).
constexpr int kMaxHarmonicTerms = 8;
constexpr int kMaxHarmonicParams = 2 * kMaxHarmonicTerms + 1;

// Cholesky pivot, relative to the largest diagonal entry, at or below which the normal
// matrix counts as singular and the power is NaN: 32 units of rounding, i.e. singular to
// working precision (Astropy's np.linalg.solve raises only on exact zeros; a rank-deficient
// design matrix in floating point is that, up to rounding: e.g. sin(2 pi f t) at f = 1 for
// integer t is ~1e-16, not 0).
template <typename T>
LS_HOST_DEVICE T SingularPivotTolerance() {
  return sizeof(T) == 4 ? T(3.8e-6) : T(7.1e-15);
}

// Normal matrix entry between model columns a and b, indices into Astropy's column order
// shifted so that index 0 is the bias (present or not): column 2n-1 is sin(n theta), 2n is
// cos(n theta). cw/sw hold C_j/S_j for j = 0 .. 2q.
template <typename T>
LS_HOST_DEVICE T HarmonicNormalEntry(const T* cw, const T* sw, int a, int b) {
  if (a == 0 && b == 0) return cw[0];
  if (a == 0 || b == 0) {
    const int c = a == 0 ? b : a;
    const int n = (c + 1) / 2;
    return (c & 1) ? sw[n] : cw[n];
  }
  const int na = (a + 1) / 2, nb = (b + 1) / 2;
  const bool sa = a & 1, sb = b & 1;
  const int d = na > nb ? na - nb : nb - na;
  const int s = na + nb;
  if (sa && sb) return T(0.5) * (cw[d] - cw[s]);   // sin a sin b
  if (!sa && !sb) return T(0.5) * (cw[d] + cw[s]);  // cos a cos b
  // sin(n_s theta) cos(n_c theta) = (sin((n_s + n_c) theta) + sin((n_s - n_c) theta)) / 2
  const int ns = sa ? na : nb, nc = sa ? nb : na;
  const T diff = ns >= nc ? sw[ns - nc] : -sw[nc - ns];
  return T(0.5) * (sw[s] + diff);
}

// p = b^T A^-1 b for the q-term model, normalised like LombScarglePower. cw, sw: C_j, S_j for
// j = 0 .. 2q; yc, ys: YC_j, YS_j for j = 0 .. q (index 0 unused). NaN when A is singular.
template <typename T>
LS_HOST_DEVICE T HarmonicPower(const T* cw, const T* sw, const T* yc, const T* ys, int q,
                               bool fit_mean, int norm, T yy, T psd_scale) {
  const int first = fit_mean ? 0 : 1;
  const int P = 2 * q + 1 - first;
  T L[kMaxHarmonicParams * kMaxHarmonicParams];
  T z[kMaxHarmonicParams];
  T scale = T(0);
  for (int i = 0; i < P; ++i) {
    const T d = HarmonicNormalEntry(cw, sw, i + first, i + first);
    scale = d > scale ? d : scale;
  }
  // Cholesky A = L L^T, column by column, with forward substitution L z = b alongside.
  for (int i = 0; i < P; ++i) {
    const int ci = i + first;
    for (int j = 0; j <= i; ++j) {
      const int cj = j + first;
      T v = HarmonicNormalEntry(cw, sw, ci, cj);
      for (int k = 0; k < j; ++k) v -= L[i * P + k] * L[j * P + k];
      if (i == j) {
        if (!(v > SingularPivotTolerance<T>() * scale)) return T(0) / T(0);
        L[i * P + i] = sqrt(v);
      } else {
        L[i * P + j] = v / L[j * P + j];
      }
    }
    T b = ci == 0 ? T(0) : ((ci & 1) ? ys[(ci + 1) / 2] : yc[(ci + 1) / 2]);
    for (int k = 0; k < i; ++k) b -= L[i * P + k] * z[k];
    z[i] = b / L[i * P + i];
  }
  T p = 0;
  for (int i = 0; i < P; ++i) p += z[i] * z[i];  // b^T A^-1 b = |L^-1 b|^2
  return NormalizePower(p, norm, yy, psd_scale);
}

}  // namespace gpucompute_kernels
