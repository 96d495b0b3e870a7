// The CPU reference of Assimilate against the Kalman filter built here from the prior sample
// covariance (explicit n x n matrices, LU solves: a different route from the code under test),
// the two forms against each other, float32 against float64, full R against diagonal R, the
// relaxations against their definitions, and validation messages.
#include "server/ops/assimilate/cpu_assimilate.h"

#include <lapacke.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::assimilate {
namespace {

using ::testing::HasSubstr;

using Matrix = std::vector<double>;  // row-major

std::string Bytes(const std::vector<double>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

// A problem with linear H (HX = H X) and the arrays it views.
struct TestCase {
  int64_t n = 0, m = 0, N = 0;
  Matrix x, h, hx, y, r_var, r_full, pert;
  std::string x_b, hx_b, y_b, r_b, pert_b;
  Problem problem;

  // Points problem's views at the (re-encoded) vectors; `full_r` sends r_full.
  void Bind(bool full_r) {
    x_b = Bytes(x);
    hx_b = Bytes(hx);
    y_b = Bytes(y);
    r_b = Bytes(full_r ? r_full : r_var);
    pert_b = Bytes(pert);
    problem.n = n;
    problem.m = m;
    problem.N = N;
    problem.x = {ElementType::kFloat64, x_b};
    problem.hx = {ElementType::kFloat64, hx_b};
    problem.y = {ElementType::kFloat64, y_b};
    problem.obs_error_kind = full_r ? ObsErrorKind::kCovariance : ObsErrorKind::kVariances;
    problem.obs_error = {ElementType::kFloat64, r_b};
    problem.has_perturbations = !pert.empty();
    problem.perturbations = {ElementType::kFloat64, pert_b};
  }
};

Matrix MatMul(const Matrix& a, const Matrix& b, int64_t rows, int64_t inner, int64_t cols) {
  Matrix c(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < inner; ++k) {
      for (int64_t j = 0; j < cols; ++j) c[i * cols + j] += a[i * inner + k] * b[k * cols + j];
    }
  }
  return c;
}

Matrix Transpose(const Matrix& a, int64_t rows, int64_t cols) {
  Matrix t(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  }
  return t;
}

// A random case: X ~ N(mu, .) with members correlated across the state, H random, y random,
// R either diagonal (variances in [0.5, 1.5]) or full SPD with that diagonal scale.
TestCase RandomCase(std::mt19937_64& rng, int64_t n, int64_t m, int64_t N, bool correlated_r) {
  std::normal_distribution<double> g(0, 1);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  TestCase c;
  c.n = n;
  c.m = m;
  c.N = N;
  c.x.resize(n * N);
  for (int64_t i = 0; i < n; ++i) {
    const double mu = 3 * g(rng);
    for (int64_t j = 0; j < N; ++j) c.x[i * N + j] = mu + g(rng) + (i > 0 ? 0.5 * c.x[(i - 1) * N + j] : 0);
  }
  c.h.resize(m * n);
  for (double& v : c.h) v = g(rng) / std::sqrt(static_cast<double>(n));
  c.hx = MatMul(c.h, c.x, m, n, N);
  c.y.resize(m);
  for (double& v : c.y) v = 3 * g(rng);
  c.r_var.resize(m);
  for (double& v : c.r_var) v = u(rng);
  c.r_full.assign(m * m, 0.0);
  if (correlated_r) {
    // R = D^1/2 C D^1/2 with C = B B^T / k + 0.5 I normalised to a unit diagonal.
    const int64_t k = m + 3;
    Matrix b(m * k);
    for (double& v : b) v = g(rng);
    Matrix cm = MatMul(b, Transpose(b, m, k), m, k, m);
    for (int64_t i = 0; i < m; ++i) cm[i * m + i] += 0.5 * k;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        c.r_full[i * m + j] = cm[i * m + j] / std::sqrt(cm[i * m + i] * cm[j * m + j]) *
                              std::sqrt(c.r_var[i] * c.r_var[j]);
      }
    }
    for (int64_t i = 0; i < m; ++i) c.r_var[i] = c.r_full[i * m + i];
  } else {
    for (int64_t i = 0; i < m; ++i) c.r_full[i * m + i] = c.r_var[i];
  }
  c.Bind(correlated_r);
  return c;
}

// Solves A X = B (A k x k, B k x cols) by LU (LAPACKE_dgesv), a route the code does not take.
Matrix Solve(Matrix a, Matrix b, int64_t k, int64_t cols) {
  std::vector<lapack_int> piv(k);
  const int info = LAPACKE_dgesv(LAPACK_ROW_MAJOR, static_cast<int>(k), static_cast<int>(cols), a.data(),
                                 static_cast<int>(k), piv.data(), b.data(), static_cast<int>(cols));
  EXPECT_EQ(info, 0);
  return b;
}

struct Moments {
  Matrix mean;  // n
  Matrix cov;   // n x n, N - 1 normalisation
};

Moments SampleMoments(const Matrix& e, int64_t n, int64_t N) {
  Moments mo;
  mo.mean.assign(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < N; ++j) mo.mean[i] += e[i * N + j] / N;
  }
  mo.cov.assign(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      double s = 0;
      for (int64_t j = 0; j < N; ++j) s += (e[i * N + j] - mo.mean[i]) * (e[k * N + j] - mo.mean[k]);
      mo.cov[i * n + k] = s / (N - 1);
    }
  }
  return mo;
}

// The Kalman update of the (inflated) prior sample moments with linear H and full R:
// K = P H^T (H P H^T + R)^-1, mean_a = mean + K (y - H mean), P_a = (I - K H) P.
struct Kalman {
  Matrix mean_a, cov_a, gain;
};

Kalman KalmanUpdate(const TestCase& c, double inflation) {
  const int64_t n = c.n, m = c.m;
  Moments prior = SampleMoments(c.x, n, c.N);
  for (double& v : prior.cov) v *= inflation * inflation;
  const Matrix pht = MatMul(prior.cov, Transpose(c.h, m, n), n, n, m);  // n x m
  Matrix s = MatMul(c.h, pht, m, n, m);
  for (int64_t i = 0; i < m * m; ++i) s[i] += c.r_full[i];
  // K^T = S^-1 (P H^T)^T (S symmetric).
  const Matrix kt = Solve(s, Transpose(pht, n, m), m, n);
  Kalman k;
  k.gain = Transpose(kt, m, n);  // n x m
  Matrix hm = MatMul(c.h, prior.mean, m, n, 1);
  Matrix innov(m);
  for (int64_t i = 0; i < m; ++i) innov[i] = c.y[i] - hm[i];
  const Matrix inc = MatMul(k.gain, innov, n, m, 1);
  k.mean_a.resize(n);
  for (int64_t i = 0; i < n; ++i) k.mean_a[i] = prior.mean[i] + inc[i];
  const Matrix kh = MatMul(k.gain, c.h, n, m, n);
  Matrix ikh(n * n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) ikh[i * n + j] = (i == j) - kh[i * n + j];
  }
  k.cov_a = MatMul(ikh, prior.cov, n, n, n);
  return k;
}

Matrix Analysis(const ProblemResult& r) {
  Matrix out(r.analysis.size() / sizeof(double));
  std::memcpy(out.data(), r.analysis.data(), r.analysis.size());
  return out;
}

Matrix AnalysisF32(const ProblemResult& r) {
  std::vector<float> f(r.analysis.size() / sizeof(float));
  std::memcpy(f.data(), r.analysis.data(), r.analysis.size());
  return Matrix(f.begin(), f.end());
}

double MaxAbsDiff(const Matrix& a, const Matrix& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    d = std::max(d, std::abs(a[i] - b[i]));
  }
  return d;
}

double MaxAbs(const Matrix& a) {
  double d = 0;
  for (double v : a) d = std::max(d, std::abs(v));
  return d;
}

ProblemResult Analyse(const Problem& p, Form form, ElementType dtype = ElementType::kFloat64,
                  int64_t index = 0) {
  Problem q = p;
  q.form = form;
  auto r = CpuAnalyse(q, index, dtype);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->form, form);
  return *std::move(r);
}

struct Shape {
  int64_t n, m, N;
};
// m < N, m > N, m = N, n < N; sizes include the smallest ensemble.
const Shape kShapes[] = {{12, 5, 9}, {10, 14, 6}, {8, 8, 8}, {3, 7, 11}, {6, 4, 2}};

TEST(AssimilateCpu, EtkfEqualsTheKalmanUpdateOfThePriorSampleCovariance) {
  std::mt19937_64 rng(1);
  for (const Shape& s : kShapes) {
    for (bool full_r : {false, true}) {
      for (double inflation : {1.0, 1.1}) {
        for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
          TestCase c = RandomCase(rng, s.n, s.m, s.N, full_r);
          c.problem.method = Method::kEtkf;
          c.problem.inflation = inflation;
          const ProblemResult r = Analyse(c.problem, form);
          const Moments got = SampleMoments(Analysis(r), s.n, s.N);
          const Kalman want = KalmanUpdate(c, inflation);
          SCOPED_TRACE(::testing::Message() << "n=" << s.n << " m=" << s.m << " N=" << s.N
                                            << " full_r=" << full_r << " inflation=" << inflation
                                            << " form=" << FormName(form));
          EXPECT_LE(MaxAbsDiff(got.mean, want.mean_a), 1e-10 * std::max(1.0, MaxAbs(want.mean_a)));
          EXPECT_LE(MaxAbsDiff(got.cov, want.cov_a), 1e-10 * std::max(1.0, MaxAbs(want.cov_a)));
          // Diagnostics: innovation mean y - mean(HX), spread sqrt(trace(Pa)/n).
          const Moments hx = SampleMoments(c.hx, s.m, s.N);
          for (int64_t i = 0; i < s.m; ++i) EXPECT_NEAR(r.innovation_mean[i], c.y[i] - hx.mean[i], 1e-12);
          double trace = 0;
          for (int64_t i = 0; i < s.n; ++i) trace += got.cov[i * s.n + i];
          EXPECT_NEAR(r.analysis_spread, std::sqrt(trace / s.n), 1e-12);
        }
      }
    }
  }
}

// The stochastic EnKF with client perturbations: member j moves by K (y + e_j - HX_j), K the
// gain of the inflated prior sample covariance, HX_j from the inflated anomalies.
TEST(AssimilateCpu, StochasticEqualsThePerturbedObservationFormula) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> g(0, 1);
  for (const Shape& s : kShapes) {
    for (bool full_r : {false, true}) {
      for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
        const double inflation = 1.07;
        TestCase c = RandomCase(rng, s.n, s.m, s.N, full_r);
        c.pert.resize(s.m * s.N);
        for (double& v : c.pert) v = g(rng);  // deliberately not centred: used as given
        c.Bind(full_r);
        c.problem.method = Method::kStochastic;
        c.problem.inflation = inflation;
        const Matrix got = Analysis(Analyse(c.problem, form));
        const Kalman k = KalmanUpdate(c, inflation);
        const Moments x = SampleMoments(c.x, s.n, s.N), hx = SampleMoments(c.hx, s.m, s.N);
        Matrix want(s.n * s.N);
        for (int64_t j = 0; j < s.N; ++j) {
          Matrix innov(s.m);
          for (int64_t i = 0; i < s.m; ++i) {
            const double hxj = hx.mean[i] + inflation * (c.hx[i * s.N + j] - hx.mean[i]);
            innov[i] = c.y[i] + c.pert[i * s.N + j] - hxj;
          }
          const Matrix inc = MatMul(k.gain, innov, s.n, s.m, 1);
          for (int64_t i = 0; i < s.n; ++i) {
            want[i * s.N + j] = x.mean[i] + inflation * (c.x[i * s.N + j] - x.mean[i]) + inc[i];
          }
        }
        SCOPED_TRACE(::testing::Message() << "n=" << s.n << " m=" << s.m << " N=" << s.N
                                          << " full_r=" << full_r << " form=" << FormName(form));
        EXPECT_LE(MaxAbsDiff(got, want), 1e-10 * std::max(1.0, MaxAbs(want)));
      }
    }
  }
}

TEST(AssimilateCpu, ObservationAndEnsembleSpaceFormsAgree) {
  std::mt19937_64 rng(3);
  for (const Shape& s : kShapes) {
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      TestCase c = RandomCase(rng, s.n, s.m, s.N, true);
      c.problem.method = method;
      c.problem.seed = 77;  // stochastic: server-drawn perturbations, the same in both forms
      const Matrix obs = Analysis(Analyse(c.problem, Form::kObservationSpace));
      const Matrix ens = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
      EXPECT_LE(MaxAbsDiff(obs, ens), 1e-10 * std::max(1.0, MaxAbs(ens)))
          << MethodName(method) << " n=" << s.n << " m=" << s.m << " N=" << s.N;
    }
  }
}

TEST(AssimilateCpu, FullRThatIsDiagonalEqualsVariances) {
  std::mt19937_64 rng(4);
  for (Method method : {Method::kEtkf, Method::kStochastic}) {
    TestCase c = RandomCase(rng, 9, 13, 7, false);
    c.problem.method = method;
    c.problem.seed = 5;
    const Matrix diag = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
    c.Bind(true);  // the same R as an m x m matrix
    c.problem.method = method;
    c.problem.seed = 5;
    const Matrix full = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
    EXPECT_LE(MaxAbsDiff(diag, full), 1e-12 * std::max(1.0, MaxAbs(diag))) << MethodName(method);
  }
}

// Server-drawn perturbations are E = L Z with Z = DrawWhitenedPerturbations(seed, index): the
// same analysis as sending E explicitly.
TEST(AssimilateCpu, SeedDrawnPerturbationsAreLTimesCentredNormals) {
  std::mt19937_64 rng(5);
  for (bool full_r : {false, true}) {
    TestCase c = RandomCase(rng, 6, 8, 10, full_r);
    c.problem.method = Method::kStochastic;
    c.problem.seed = 0xfeedfaceULL;
    const int64_t index = 3;
    const Matrix drawn = Analysis(Analyse(c.problem, Form::kEnsembleSpace, ElementType::kFloat64, index));
    // L: lower Cholesky factor of R, by LAPACKE in the test too (it is the definition).
    Matrix l = c.r_full;
    ASSERT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', 8, l.data(), 8), 0);
    for (int i = 0; i < 8; ++i) {
      for (int j = i + 1; j < 8; ++j) l[i * 8 + j] = 0;
    }
    c.pert = MatMul(l, DrawWhitenedPerturbations(c.problem.seed, index, 8, 10), 8, 8, 10);
    c.Bind(full_r);
    c.problem.method = Method::kStochastic;
    const Matrix given = Analysis(Analyse(c.problem, Form::kEnsembleSpace, ElementType::kFloat64, index));
    EXPECT_LE(MaxAbsDiff(drawn, given), 1e-11 * MaxAbs(given));
    // Another problem index or seed draws other numbers.
    c.pert.clear();
    c.Bind(full_r);
    c.problem.method = Method::kStochastic;
    c.problem.seed = 0xfeedfaceULL;
    EXPECT_GT(MaxAbsDiff(Analysis(Analyse(c.problem, Form::kEnsembleSpace, ElementType::kFloat64, 4)), drawn), 1e-3);
    c.problem.seed = 1;
    EXPECT_GT(MaxAbsDiff(Analysis(Analyse(c.problem, Form::kEnsembleSpace, ElementType::kFloat64, index)), drawn), 1e-3);
  }
}

TEST(AssimilateCpu, Float32WithinOneInTenThousandOfFloat64) {
  std::mt19937_64 rng(6);
  for (const Shape& s : {Shape{40, 40, 20}, Shape{30, 12, 16}, Shape{10, 25, 8}}) {
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
        for (bool full_r : {false, true}) {
          TestCase c = RandomCase(rng, s.n, s.m, s.N, full_r);
          c.problem.method = method;
          c.problem.seed = 9;
          c.problem.inflation = 1.05;
          const Matrix f64 = Analysis(Analyse(c.problem, form));
          const Matrix f32 = AnalysisF32(Analyse(c.problem, form, ElementType::kFloat32));
          double num = 0, den = 0;
          for (size_t i = 0; i < f64.size(); ++i) {
            num += (f32[i] - f64[i]) * (f32[i] - f64[i]);
            den += f64[i] * f64[i];
          }
          EXPECT_LE(std::sqrt(num / den), 1e-4)
              << MethodName(method) << " " << FormName(form) << " full_r=" << full_r;
        }
      }
    }
  }
}

TEST(AssimilateCpu, RtppAndRtpsFollowTheirDefinitions) {
  std::mt19937_64 rng(7);
  const int64_t n = 11, m = 6, N = 8;
  for (Method method : {Method::kEtkf, Method::kStochastic}) {
    TestCase c = RandomCase(rng, n, m, N, false);
    c.problem.method = method;
    c.problem.seed = 3;
    c.problem.inflation = 1.2;
    const Matrix plain = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
    const Moments pm = SampleMoments(plain, n, N);
    const Moments prior = SampleMoments(c.x, n, N);
    const double alpha = 0.6;
    c.problem.relaxation_factor = alpha;

    c.problem.relaxation = Relaxation::kRtpp;
    const Matrix rtpp = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
    c.problem.relaxation = Relaxation::kRtps;
    const Matrix rtps = Analysis(Analyse(c.problem, Form::kEnsembleSpace));
    const Moments sm = SampleMoments(rtps, n, N);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const double aa = plain[i * N + j] - pm.mean[i];
        const double af = 1.2 * (c.x[i * N + j] - prior.mean[i]);
        EXPECT_NEAR(rtpp[i * N + j], pm.mean[i] + (1 - alpha) * aa + alpha * af, 1e-10);
      }
      const double sa = std::sqrt(pm.cov[i * n + i]), sf = 1.2 * std::sqrt(prior.cov[i * n + i]);
      EXPECT_NEAR(sm.mean[i], pm.mean[i], 1e-10);
      EXPECT_NEAR(std::sqrt(sm.cov[i * n + i]), (1 - alpha) * sa + alpha * sf, 1e-10);
    }
  }
}

TEST(AssimilateCpu, NonPositiveDefiniteRIsInvalidArgumentNamingTheProblem) {
  std::mt19937_64 rng(8);
  TestCase c = RandomCase(rng, 5, 4, 6, true);
  // Symmetric, positive diagonal, but indefinite: [[1, 2], [2, 1]] in the top-left corner.
  c.r_full.assign(16, 0.0);
  for (int i = 0; i < 4; ++i) c.r_full[i * 4 + i] = 1;
  c.r_full[1] = c.r_full[4] = 2;
  c.Bind(true);
  c.problem.method = Method::kEtkf;
  ASSERT_TRUE(ValidateValues(c.problem, 3).ok());  // only the factorisation can tell
  auto r = CpuAnalyse(c.problem, 3, ElementType::kFloat64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("problems[3].obs_error"));
  EXPECT_THAT(r.status().message(), HasSubstr("not positive definite"));
  auto r32 = CpuAnalyse(c.problem, 3, ElementType::kFloat32);
  ASSERT_FALSE(r32.ok());
  EXPECT_EQ(r32.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AssimilateCpu, ValidationNamesTheProblemFieldAndRule) {
  std::mt19937_64 rng(9);
  Limits limits;
  TestCase c = RandomCase(rng, 5, 4, 6, false);
  EXPECT_TRUE(ValidateShapes(c.problem, 0, limits).ok());
  EXPECT_TRUE(ValidateValues(c.problem, 0).ok());

  Problem p = c.problem;
  p.N = 1;
  EXPECT_THAT(ValidateShapes(p, 2, limits).message(), HasSubstr("problems[2].x.shape[1]"));
  EXPECT_THAT(ValidateShapes(p, 2, limits).message(), HasSubstr("at least 2 members"));

  p = c.problem;
  p.inflation = 0;
  EXPECT_THAT(ValidateShapes(p, 1, limits).message(), HasSubstr("problems[1].inflation"));
  p = c.problem;
  p.relaxation = Relaxation::kRtps;
  p.relaxation_factor = 1.5;
  EXPECT_THAT(ValidateShapes(p, 1, limits).message(), HasSubstr("relaxation_factor"));
  p = c.problem;
  p.has_perturbations = true;
  p.perturbations = p.hx;
  p.method = Method::kEtkf;
  EXPECT_THAT(ValidateShapes(p, 1, limits).message(), HasSubstr("only the stochastic EnKF"));

  limits.max_members = 5;
  const absl::Status over = ValidateShapes(c.problem, 4, limits);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("problems[4]"));

  c.hx[2 * 6 + 3] = NAN;
  c.Bind(false);
  const absl::Status nan = ValidateValues(c.problem, 7);
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nan.message(), HasSubstr("problems[7].hx"));
  EXPECT_THAT(nan.message(), HasSubstr("hx[2, 3]"));

  TestCase d = RandomCase(rng, 5, 4, 6, false);
  d.r_var[1] = 0;
  d.Bind(false);
  EXPECT_THAT(ValidateValues(d.problem, 0).message(), HasSubstr("obs_error[1] is 0"));
  TestCase e = RandomCase(rng, 5, 4, 6, true);
  e.r_full[1] += 0.1;  // not symmetric
  e.Bind(true);
  EXPECT_THAT(ValidateValues(e.problem, 0).message(), HasSubstr("must be symmetric"));
}

TEST(AssimilateCpu, CostModelPicksTheSmallerSpace) {
  Problem p;
  p.n = 1000;
  Limits limits;
  p.method = Method::kStochastic;
  p.m = 10;
  p.N = 100;
  EXPECT_EQ(ChooseForm(p, limits), Form::kObservationSpace);
  p.m = 10000;
  p.N = 50;
  EXPECT_EQ(ChooseForm(p, limits), Form::kEnsembleSpace);
  p.method = Method::kEtkf;
  p.m = 40;
  p.N = 40;
  EXPECT_EQ(ChooseForm(p, limits), Form::kEnsembleSpace);
  // Over the m x m limit the observation-space form is never chosen.
  p.method = Method::kStochastic;
  p.m = 20000;
  p.N = 40000;
  EXPECT_EQ(ChooseForm(p, limits), Form::kEnsembleSpace);
  Limits high;
  high.max_covariance_obs = 1 << 20;
  EXPECT_EQ(ChooseForm(p, high), Form::kObservationSpace);
  p.form = Form::kObservationSpace;
  EXPECT_EQ(ChooseForm(p, limits), Form::kObservationSpace);
}

}  // namespace
}  // namespace gpucompute::assimilate
