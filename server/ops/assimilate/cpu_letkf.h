// The CPU reference of the LETKF (Hunt, Kostelich & Szunyogh 2007), with the conventions of
// assimilate.h (N - 1 normalisation, inflation of the forecast anomalies, relaxation, spread)
// and the localisation of math/localization.h. For state variable i, the observations whose
// taper coefficient c_ij exceeds 1e-3 form its local problem, in which observation j's inverse
// variance is c_ij / r_j (R-localisation: the whitened rows of HX anomalies and innovations
// are multiplied by sqrt(c_ij)); the ETKF of that local problem (the ensemble-space form, a
// symmetric eigendecomposition of the local N x N matrix) gives row i of the analysis:
//     G_i = (N-1) I + Yl^T Yl,  wbar_i = G_i^-1 Yl^T dl,  W_i = [(N-1) G_i^-1]^(1/2),
//     xa_i = xbar_i + a_i (wbar_i 1^T + W_i),
// with a_i the inflated forecast anomalies of row i. A variable with no observation in reach
// keeps its (inflated) forecast. The innovation mean is the global one, y - mean(HX).
//
// ComputeTransform whitens HX's anomalies and the innovations once and bins the observations
// by cell as the GPU does (letkf_geometry.h), so that ApplyRows looks only at the cells around
// each variable. It refuses a problem whose candidate pairs exceed its limit
// (Localization::max_candidates) with RESOURCE_EXHAUSTED, before any local analysis.
#pragma once

#include <cstdint>
#include <memory>

#include "server/ops/assimilate/cpu_assimilate.h"

namespace gpucompute::assimilate {

// A CpuAnalysis of an LETKF problem (problem.method == Method::kLetkf).
std::unique_ptr<CpuAnalysis> CreateLetkfAnalysis(const Problem& problem, int64_t index, ElementType dtype);

}  // namespace gpucompute::assimilate
