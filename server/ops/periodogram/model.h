// Best-fit models of a series at one frequency: Astropy's LombScargle.offset(),
// model_parameters(frequency) and model(t, frequency), in float64 on the host.
//   offset = sum(y / dy^2) / sum(1 / dy^2) with center_data, else 0
//   theta  = solve(X^T X, X^T (y - offset) / dy), X the design matrix divided by dy:
//            columns [1 (fit_mean only), sin(2 pi f t), cos(2 pi f t), ..., sin(2 pi n f t),
//            cos(2 pi n f t)] at the times as sent (Astropy does not re-centre plain arrays)
//   model(t_fit) = offset + X(t_fit) theta
// A singular X^T X gives NaN parameters (Astropy raises LinAlgError).
#pragma once

#include <vector>

#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {

double ModelOffset(const SeriesSpec& series);

// The model of `series` (its nterms, fit_mean, center_data) at `frequency`, evaluated at t_fit.
ModelResult FitModel(const SeriesSpec& series, double frequency, const std::vector<double>& t_fit);

}  // namespace gpucompute::periodogram
