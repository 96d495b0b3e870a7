// Ensemble data assimilation: the analysis step of the stochastic (perturbed-observation) EnKF
// and of the ETKF, as every backend computes it. A request carries a batch of independent
// problems; each is validated here and its analysis is defined below.
//
// Notation (one problem). Forecast ensemble X (n x N, state x members), its image in
// observation space HX (m x N; the client applies its own, possibly nonlinear, H), observations
// y (m), observation-error covariance R (m x m: a variance vector for diagonal R, or a full
// symmetric positive definite matrix). 1 is the N-vector of ones.
//
// Conventions (what users of DAPPER, PDAF and OOPS need to compare against):
//
//  * Normalisation by N - 1: P = A A^T / (N - 1) with A = X - xbar 1^T, xbar = X 1 / N.
//    (DAPPER's EnKF_analysis uses N1 = N - 1 throughout; PDAF's ETKF/ESTKF and OOPS/JEDI's
//    LETKF work with N - 1 as well, as far as we know.)
//
//  * Multiplicative inflation lambda (default 1) applies to the FORECAST anomalies, before the
//    update, in state and observation space alike:
//        A = lambda (X - xbar 1^T),   Y = lambda (HX - ybar 1^T),   ybar = HX 1 / N.
//    The update then treats xbar 1^T + A as the prior ensemble. (DAPPER's `infl` scales the
//    ANALYSIS anomalies after the update (post_process); PDAF's forgetting factor rho divides
//    the forecast covariance, i.e. rho = 1/lambda^2 here; OOPS/JEDI's multiplicative prior
//    inflation is this one. In a cycled filter without model noise, inflating the analysis
//    at one cycle and the forecast at the next differ only through the nonlinear forecast, so
//    DAPPER's published inflation factors carry over.)
//
//  * Full R is whitened ONCE with its Cholesky factor R = L L^T (L lower): every observation-
//    space quantity is replaced by L^-1 times it (Yw = L^-1 Y, dw = L^-1 (y - ybar), ...), and
//    the analysis is computed with R = I. A variance vector r whitens by 1/sqrt(r_i). R must be
//    symmetric (to 1e-12 relative, float64) and positive definite: a Cholesky failure is
//    INVALID_ARGUMENT naming the problem, never INTERNAL.
//
//  * ETKF (Bishop et al. 2001, in the form of Hunt et al. 2007), symmetric square root:
//        G = (N-1) I + Yw^T Yw                                     (N x N, SPD)
//        wbar = G^-1 Yw^T dw                                       (mean weights)
//        W = [(N-1) G^-1]^(1/2), the symmetric square root (G = V diag(g) V^T:
//            W = V diag(sqrt((N-1)/g)) V^T, via SYEVD)
//        Xa = xbar 1^T + A (wbar 1^T + W)
//    Since Y 1 = 0, W 1 = 1: the analysis mean is xbar + A wbar and the analysis anomalies are
//    A W, whose sample covariance (N - 1 normalisation) is exactly the Kalman analysis
//    covariance of the prior sample covariance. No random rotation is applied. (DAPPER's
//    EnKF('Sqrt'), default 'eig' variant, is this transform with rot=False.)
//
//  * Stochastic EnKF (Burgers et al. 1998, Houtekamer & Mitchell 1998), perturbed
//    observations E (m x N), one column per member:
//        Xa = xbar 1^T + A + A Y^T (Y Y^T + (N-1) R)^-1 (y 1^T + E - ybar 1^T - Y)
//    i.e. member j is updated with the gain of the prior sample covariance and the innovation
//    y + e_j - HX_j (HX_j taken from the inflated anomalies).
//    Perturbations are either
//      - supplied by the client (m x N, in units of y): used exactly as given, neither centred
//        nor scaled (so that any convention can be reproduced); or
//      - drawn on the server from a 64-bit seed: z_ij ~ N(0, 1) from Philox4x32-10 keyed by
//        (seed, problem index, element i*N + j) (philox.h; the GPU draws the same numbers),
//        centred across members (z_i. <- z_i. - mean_j z_ij) and scaled to R: E = L Z (L the
//        Cholesky factor; sqrt(r_i) for a variance vector). Centring makes the perturbations
//        add nothing to the analysis mean, and with the N - 1 normalisation the expected
//        sample covariance of E is exactly R (E[Z Z^T] = (N - 1) I after centring); the sample
//        covariance is not forced to equal R. DAPPER's EnKF('PertObs') does the same (`mean0`
//        of draws from N(0, R), no rescaling).
//
//  * Relaxation, applied to the analysis anomalies after the update; the analysis mean is
//    unchanged. Aa are the analysis anomalies, Af = A the (inflated) forecast anomalies that
//    entered the update, alpha the factor in [0, 1]:
//      RTPP (Zhang et al. 2004):            Aa <- (1 - alpha) Aa + alpha Af
//      RTPS (Whitaker & Hamill 2012), per state variable i with the N - 1 sample standard
//      deviations sf_i of Af and sa_i of Aa:  Aa_i. <- Aa_i. * (1 - alpha + alpha sf_i / sa_i)
//      (a variable with sa_i = 0 is left as is).
//
//  * LETKF (Hunt, Kostelich & Szunyogh 2007): the ETKF above, ensemble-space form, once per
//    state variable over the observations near it, each observation's inverse variance
//    multiplied by a taper of its distance (R-localisation; math/localization.h defines the
//    distances, tapers and radius, DAPPER's loc_rad). Diagonal R only. cpu_letkf.h spells it
//    out; both backends run it (the CUDA backend for N <= 128).
//
//  * Diagnostics per problem: the innovation mean d = y - ybar (m values, before inflation,
//    which does not change ybar) and the analysis spread sqrt(trace(Pa) / n), Pa the N - 1
//    sample covariance of the returned analysis ensemble (DAPPER's "spread" / rmv).
//
// Two algebraically equal forms (chosen per problem by AnalysisCost, or forced by the client):
//   observation space: S = Yw Yw^T + (N-1) I (m x m, SYRK), Cholesky (POTRF), solves (POTRS);
//     ETKF: wbar = Yw^T S^-1 dw, W = (I - Yw^T S^-1 Yw)^(1/2) (= [(N-1) G^-1]^(1/2), Woodbury).
//     EnKF: T = I + Yw^T S^-1 Dw. Cost O(m^2 N + m^3).
//   ensemble space: G (N x N, SYRK), Cholesky / SYEVD, O(m N^2 + N^3).
// Both end in one ensemble transform: Xa = xbar 1^T + A T with T (N x N), so no n x m gain is
// ever formed and the state-sized work is one n x N x N product (split by rows).
//
// Compute dtype: float64 (default) or float32; inputs may come in any float dtype and are
// converted. The analysis ensemble is returned in the compute dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/element_type.h"
#include "math/localization.h"

namespace gpucompute::assimilate {

enum class Method { kEtkf, kStochastic, kLetkf };
enum class Relaxation { kNone, kRtpp, kRtps };
// Which algebraic form computes the transform; kAuto picks the cheaper (AnalysisCost).
enum class Form { kAuto, kObservationSpace, kEnsembleSpace };
enum class ObsErrorKind { kVariances, kCovariance };

const char* MethodName(Method m);        // "etkf", "enkf", "letkf"
const char* RelaxationName(Relaxation r);  // "none", "rtpp", "rtps"
const char* FormName(Form f);            // "auto", "observation_space", "ensemble_space"

// A read-only view of a row-major array in the request message (any float ElementType).
// The bytes belong to the request, which outlives every batch that uses it.
struct ArrayView {
  ElementType dtype = ElementType::kFloat64;
  absl::string_view bytes;
  // Every value is known to be finite (a resident tensor checked as its bytes arrived):
  // validation need not read them again.
  bool known_finite = false;

  int64_t size() const { return static_cast<int64_t>(bytes.size()) / ElementSize(dtype); }
  double at(int64_t i) const;  // element i widened to double (slow path: tests, validation)
};

// The LETKF's localisation (math/localization.h): coordinates, metric, taper and radius.
struct Localization {
  int64_t dims = 0;         // d, the coordinates of a point
  ArrayView state_coords;   // n x d
  ArrayView obs_coords;     // m x d
  localization::Metric metric = localization::Metric::kEuclidean;
  std::vector<double> domain;  // periodic: the length of each axis (d values)
  double sphere_radius = 0;    // great circle
  double radius = 0;
  localization::Taper taper = localization::Taper::kGaspariCohn;
  // The most candidate pairs (letkf_geometry.h's CandidatePairs) the analysis may examine:
  // the server's limit, set while decoding. More: RESOURCE_EXHAUSTED, before any local analysis.
  int64_t max_candidates = std::numeric_limits<int64_t>::max();
};

// One analysis problem, as decoded from the wire.
struct Problem {
  int64_t n = 0;  // state size
  int64_t m = 0;  // observations
  int64_t N = 0;  // members
  Method method = Method::kEtkf;
  ArrayView x;          // n x N
  ArrayView hx;         // m x N
  ArrayView y;          // m
  ObsErrorKind obs_error_kind = ObsErrorKind::kVariances;
  ArrayView obs_error;  // m variances, or m x m covariance (symmetric positive definite)
  // Stochastic only: client perturbations (m x N), or else drawn from `seed`.
  bool has_perturbations = false;
  ArrayView perturbations;
  uint64_t seed = 0;
  double inflation = 1.0;
  Relaxation relaxation = Relaxation::kNone;
  double relaxation_factor = 0.0;
  Form form = Form::kAuto;
  Localization localization;  // LETKF only
};

// Limits a problem is validated against (RESOURCE_EXHAUSTED when exceeded).
struct Limits {
  int64_t max_problems_per_request = 100000;
  int64_t max_members = 4096;           // N: the N x N transform and its eigendecomposition
  int64_t max_covariance_obs = 16384;   // m of a full R, or of the observation-space form
  // LETKF: the candidate (state variable, observation) pairs of one problem, the observations
  // in the binning cells around each variable (Localization::max_candidates). Each costs about
  // N^2 / 2 multiply-adds; 2^34 is about 45 times the 10^6-variable benchmark's.
  int64_t max_letkf_candidates = int64_t{1} << 34;
};

// One request: a batch of problems in one compute dtype.
struct Request {
  ElementType dtype = ElementType::kFloat64;  // compute and output dtype: float32 or float64
  std::vector<Problem> problems;
};

// Requests of one compute dtype coalesced by the scheduler.
struct Batch {
  ElementType dtype = ElementType::kFloat64;
  std::vector<std::shared_ptr<const Request>> requests;
  // Optional: true once no caller waits any more (see periodogram::Batch::abandoned).
  std::function<bool()> abandoned;

  int64_t problems() const;
};

// The result of one problem.
struct ProblemResult {
  std::string analysis;         // n x N, the compute dtype, raw bytes (moved into the Tensor)
  std::vector<double> innovation_mean;  // m: y - mean(HX)
  double analysis_spread = 0;   // sqrt(trace(Pa) / n)
  Form form = Form::kAuto;      // the form that computed it (never kAuto)
};

// The result of one request: its own status (a non-SPD R fails its request, not the batch).
struct Output {
  absl::Status status;
  std::vector<ProblemResult> problems;
};

// ---- validation (all messages name the problem and the field: "problems[3].hx.shape ...")

// Shapes, N >= 2, method/perturbation/relaxation consistency, inflation > 0 and finite,
// relaxation factor in [0, 1], limits. Does not read values.
absl::Status ValidateShapes(const Problem& p, int64_t index, const Limits& limits);

// Every value finite; variances > 0; a full R symmetric with a positive diagonal. O(size).
absl::Status ValidateValues(const Problem& p, int64_t index);

// ---- cost model

// Estimated floating-point operations of each form (the parts that differ; the shared
// n x N x N update is left out). `observation_space` is +inf when m > max_covariance_obs.
struct Cost {
  double observation_space = 0;
  double ensemble_space = 0;
};
Cost AnalysisCost(const Problem& p, const Limits& limits);

// The form a problem runs in: the forced one, or the cheaper one under kAuto.
Form ChooseForm(const Problem& p, const Limits& limits);

// Work of a whole problem in flops (scheduler cost and task sizing).
double ProblemFlops(const Problem& p);

}  // namespace gpucompute::assimilate
