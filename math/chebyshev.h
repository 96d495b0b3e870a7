// x^(-1/2) and x^(-1) of a symmetric positive definite matrix applied to a vector by Chebyshev
// series, for matrices whose spectrum lies in [1, kappa] with kappa small: p(G) v with p the
// series truncated at a degree where its error on [1, kappa] is at most 1e-15 relative (2^-30
// for results rounded to float32: 1/64 of their rounding's unit, at about 0.6 of the degree). Each
// term is one product G v (three-term recurrence on t = (2 G - (kappa + 1) I) / (kappa - 1),
// whose spectrum lies in [-1, 1]), so the series needs neither a factorisation nor a reduction:
// the LETKF's GPU kernel takes this path for well-conditioned local problems, where degree
// products cost less than a tridiagonalisation (math/inverse_sqrt.h covers every other case).
//
// The degree grows with kappa about as log(2e15) / log((sqrt(kappa) + 1) / (sqrt(kappa) - 1)):
// 20 at kappa = 2, 49 at 8, 106 at 32. The table holds a ladder of intervals [1, 2^((k+1)/4)]
// (a bound is rounded up by at most 2^(1/4), at most 6% on the degree); the coefficients come
// from the series' definition (a discrete cosine transform of f at 256 Chebyshev points, in
// long double), on the host, once (milliseconds). Header-only; Select and Evaluate on host and
// device.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "math/host_device.h"

namespace gpucompute::chebyshev {

inline constexpr int kRungs = 22;        // kappa = 2^0.25 ... 2^5.5
inline constexpr int kMaxDegree = 128;   // rungs needing more are left out (degree 0)
inline constexpr int kCoefficients = 3072;

// The precision of the results a series serves, and its truncation's error relative to f on
// [1, kappa]. A rung stores the coefficients up to its double degree; the single degree is a
// shorter truncation of the same series.
enum class Precision { kDouble, kSingle };
inline constexpr double kTolerance = 1e-15;
inline constexpr double kSingleTolerance = 0x1p-30;

// Layout of the table, in doubles: kappa, double degree, single degree, first coefficient (kRungs
// each); then each rung's coefficients of x^(-1/2), then of x^(-1) (double degree + 1 each:
// c_0 / 2, c_1, ...).
inline constexpr int kHeader = 4 * kRungs;
inline constexpr size_t kTableDoubles = kHeader + kCoefficients;

// Rung k's interval is [1, RungKappa(k)].
GPUCOMPUTE_HOST_DEVICE inline double RungKappa(int k) { return std::exp2(0.25 * (k + 1)); }

namespace detail {

inline constexpr int kPoints = 256;     // Chebyshev points sampled (aliasing: c_{2 kPoints - n}, nil)
inline constexpr int kTailWindow = 40;  // coefficients summed for a truncation's error

// The Chebyshev coefficients of f on [1, kappa] (p(t) = c_0 / 2 + sum c_n T_n(t) with
// x = 1 + (kappa - 1)(t + 1) / 2), the first `count`: the discrete cosine transform of f at
// kPoints Chebyshev points, each cosine cos(pi n (2j + 1) / (2 kPoints)) read from one table of
// 4 kPoints angles. The coefficients carry about 1e-19 of rounding.
template <typename F>
std::vector<long double> Coefficients(F f, long double kappa, int count) {
  const long double pi = 3.141592653589793238462643383279502884L;
  constexpr int kAngles = 4 * kPoints;
  std::vector<long double> cosines(kAngles), fx(kPoints), c(count);
  for (int a = 0; a < kAngles; ++a) cosines[a] = std::cos(pi * a / (2 * kPoints));
  for (int j = 0; j < kPoints; ++j) fx[j] = f(1 + (kappa - 1) * (cosines[2 * j + 1] + 1) / 2);
  for (int n = 0; n < count; ++n) {
    long double s = 0;
    for (int j = 0; j < kPoints; ++j) s += fx[j] * cosines[(static_cast<long>(n) * (2 * j + 1)) % kAngles];
    c[n] = 2 * s / kPoints;
  }
  c[0] /= 2;
  return c;
}

// The lowest degree d whose truncation error, sum |c_n| over the kTailWindow coefficients after
// d (those further on are smaller by rho^-kTailWindow, and below the rounding), is within
// `tolerance` of f's smallest value on the interval, fmin; 0 if above kMaxDegree.
inline int Degree(const std::vector<long double>& c, long double fmin, double tolerance) {
  for (int d = 1; d <= kMaxDegree; ++d) {
    long double tail = 0;
    for (int n = d + 1; n <= d + kTailWindow; ++n) tail += std::fabs(c[n]);
    if (tail <= tolerance * fmin) return d;
  }
  return 0;
}

}  // namespace detail

// Writes the table (kTableDoubles); computed on the first call, then copied.
inline void WriteTable(double* out) {
  static const std::vector<double> table = [] {
    std::vector<double> t(kTableDoubles, 0.0);
    constexpr int kCount = kMaxDegree + detail::kTailWindow + 1;
    size_t at = 0;
    for (int k = 0; k < kRungs; ++k) {
      const long double kappa = RungKappa(k);
      const auto inv_sqrt = detail::Coefficients([](long double x) { return 1 / std::sqrt(x); }, kappa, kCount);
      const auto inv = detail::Coefficients([](long double x) { return 1 / x; }, kappa, kCount);
      auto degree_within = [&](double tolerance) {
        const int a = detail::Degree(inv_sqrt, 1 / std::sqrt(kappa), tolerance);
        const int b = detail::Degree(inv, 1 / kappa, tolerance);
        return a == 0 || b == 0 ? 0 : (a > b ? a : b);
      };
      const int degree = degree_within(kTolerance);
      t[k] = static_cast<double>(kappa);
      t[kRungs + k] = degree;
      t[2 * kRungs + k] = degree_within(kSingleTolerance);
      t[3 * kRungs + k] = static_cast<double>(at);
      if (degree == 0 || at + 2 * (degree + 1) > kCoefficients) {
        t[kRungs + k] = t[2 * kRungs + k] = 0;
        continue;
      }
      for (int n = 0; n <= degree; ++n) {
        t[kHeader + at + n] = static_cast<double>(inv_sqrt[n]);
        t[kHeader + at + degree + 1 + n] = static_cast<double>(inv[n]);
      }
      at += 2 * (degree + 1);
    }
    return t;
  }();
  for (size_t i = 0; i < kTableDoubles; ++i) out[i] = table[i];
}

// One rung of a table written by WriteTable: degree 0 when none holds the bound.
struct Rung {
  double kappa = 0;
  int degree = 0;
  const double* inv_sqrt = nullptr;  // degree + 1 coefficients
  const double* inv = nullptr;
};

// The lowest rung whose interval [1, kappa] holds `kappa`, truncated for `precision` (degree 0
// beyond the ladder).
GPUCOMPUTE_HOST_DEVICE inline Rung Select(const double* table, double kappa,
                                          Precision precision = Precision::kDouble) {
  Rung r;
  int k = 0;
  while (k < kRungs && table[k] < kappa) ++k;
  if (k == kRungs) return r;
  r.kappa = table[k];
  const int stored = static_cast<int>(table[kRungs + k]);
  r.degree = precision == Precision::kDouble ? stored : static_cast<int>(table[2 * kRungs + k]);
  const double* first = table + kHeader + static_cast<size_t>(table[3 * kRungs + k]);
  r.inv_sqrt = first;
  r.inv = first + stored + 1;
  return r;
}

// p(x) for a scalar x in [1, r.kappa] by Clenshaw's recurrence (tests): of x^(-1/2), or of
// x^(-1) when `inverse`.
GPUCOMPUTE_HOST_DEVICE inline double Evaluate(const Rung& r, double x, bool inverse) {
  const double* c = inverse ? r.inv : r.inv_sqrt;
  const double t = (2 * x - (r.kappa + 1)) / (r.kappa - 1);
  double b1 = 0, b2 = 0;
  for (int n = r.degree; n >= 1; --n) {
    const double b0 = 2 * t * b1 - b2 + c[n];
    b2 = b1;
    b1 = b0;
  }
  return t * b1 - b2 + c[0];
}

}  // namespace gpucompute::chebyshev
