// Best-fit models (see model.h).
#include "server/ops/periodogram/model.h"

#include <lapacke.h>

#include <cmath>

namespace gpucompute::periodogram {
namespace {

constexpr double kPi = 3.14159265358979323846;

// One row of Astropy's design matrix (before the division by dy).
void DesignRow(double t, double frequency, int nterms, bool bias, double* row) {
  int c = 0;
  if (bias) row[c++] = 1.0;
  for (int i = 1; i <= nterms; ++i) {
    const double phase = 2 * kPi * i * frequency * t;  // Astropy's order of operations
    row[c++] = std::sin(phase);
    row[c++] = std::cos(phase);
  }
}

}  // namespace

double ModelOffset(const SeriesSpec& series) {
  if (!series.center_data) return 0;
  double sw = 0, swy = 0;
  for (size_t i = 0; i < series.y.size(); ++i) {
    const double w = series.dy.empty() ? 1.0 : 1.0 / (series.dy[i] * series.dy[i]);
    sw += w;
    swy += w * series.y[i];
  }
  return swy / sw;
}

ModelResult FitModel(const SeriesSpec& series, double frequency, const std::vector<double>& t_fit) {
  ModelResult out;
  out.frequency = frequency;
  out.offset = ModelOffset(series);
  const bool bias = series.fit_mean;
  const int p = (bias ? 1 : 0) + 2 * series.nterms;
  std::vector<double> xtx(static_cast<size_t>(p) * p, 0.0), xty(p, 0.0), row(p);
  for (size_t i = 0; i < series.t.size(); ++i) {
    const double dy = series.dy.empty() ? 1.0 : series.dy[i];
    DesignRow(series.t[i], frequency, series.nterms, bias, row.data());
    for (double& v : row) v /= dy;
    const double yw = (series.y[i] - out.offset) / dy;
    for (int a = 0; a < p; ++a) {
      xty[a] += row[a] * yw;
      for (int b = 0; b < p; ++b) xtx[a * p + b] += row[a] * row[b];
    }
  }
  // Astropy: np.linalg.solve, i.e. LAPACK's LU solve (dgesv).
  std::vector<lapack_int> pivots(p);
  const lapack_int info =
      LAPACKE_dgesv(LAPACK_ROW_MAJOR, p, 1, xtx.data(), p, pivots.data(), xty.data(), 1);
  if (info != 0) std::fill(xty.begin(), xty.end(), std::nan(""));
  out.parameters = xty;
  out.y.resize(t_fit.size());
  for (size_t i = 0; i < t_fit.size(); ++i) {
    DesignRow(t_fit[i], frequency, series.nterms, bias, row.data());
    double v = out.offset;
    for (int a = 0; a < p; ++a) v += row[a] * out.parameters[a];
    out.y[i] = v;
  }
  return out;
}

}  // namespace gpucompute::periodogram
