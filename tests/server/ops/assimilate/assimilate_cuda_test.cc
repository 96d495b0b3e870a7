// CUDA Assimilate against the CPU reference (label gpu; skipped without a device): every method
// x kind of R x form x dtype on fresh random inputs, server-drawn (seeded) perturbations, many
// small problems in one batch (batched library routines and the per-problem loop), mixed shapes
// and requests in one batch, inflation with RTPP/RTPS, a non-SPD R failing only its request and
// naming the problem, the backend's RunAssimilate end to end; and each fused kernel (small
// problems, one-pass state transform, Jacobi eigensolver) and the block-inverse solve against
// the CPU and on both sides of the switches that choose them.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ops/assimilate/cpu_assimilate.h"
#include "server/ops/assimilate/cuda_assimilate.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/device/device_context.h"
#include "tests/server/device/cuda_test_util.h"
#include "tests/server/device/device_test_fixture.h"

namespace gpucompute::assimilate {
namespace {

using ::testing::HasSubstr;

std::string Bytes(const std::vector<double>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

// One problem's arrays (float64 on the wire) and the Problem viewing them.
struct Case {
  std::string x, hx, y, r, pert;
  Problem problem;
};

struct Spec {
  int64_t n = 30, m = 20, N = 10;
  Method method = Method::kEtkf;
  ObsErrorKind kind = ObsErrorKind::kVariances;
  Form form = Form::kAuto;
  bool seeded = false;
  double inflation = 1.0;
  Relaxation relaxation = Relaxation::kNone;
  double alpha = 0;
  bool bad_r = false;  // a symmetric R with a positive diagonal that is not positive definite
  double r_scale = 1.0;  // diagonal R: variances times this (small: Yw^T Yw >> (N-1) I)
};

// Random case: X with an offset and members correlated through a few modes, HX = H X + noise
// (H random), y near H mean, R diagonal in [0.5, 1.5] or full SPD (B B^T / m + diag).
std::unique_ptr<Case> MakeCase(const Spec& s, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0, 1);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  auto c = std::make_unique<Case>();
  const int64_t n = s.n, m = s.m, N = s.N;
  std::vector<double> x(n * N), h(m * n), hx(m * N, 0.0), y(m), pert(m * N);
  for (int64_t i = 0; i < n; ++i) {
    const double offset = 2.0 + g(rng);
    for (int64_t j = 0; j < N; ++j) x[i * N + j] = offset + g(rng);
  }
  for (double& v : h) v = g(rng) / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t j = 0; j < N; ++j) hx[i * N + j] += h[i * n + k] * x[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) hx[i * N + j] += 0.1 * g(rng);
    y[i] = hx[i * N] + g(rng);
  }
  std::vector<double> r;
  if (s.kind == ObsErrorKind::kVariances) {
    r.resize(m);
    for (double& v : r) v = s.r_scale * u(rng);
  } else {
    std::vector<double> b(m * m);
    for (double& v : b) v = g(rng);
    r.assign(m * m, 0.0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t k = 0; k < m; ++k) r[i * m + j] += b[i * m + k] * b[j * m + k] / static_cast<double>(m);
      }
      r[i * m + i] += u(rng);
    }
    if (s.bad_r) {  // diag 1, off-diagonal -0.9: eigenvalue 1.9 - 0.9 m < 0 for m >= 3
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < m; ++j) r[i * m + j] = i == j ? 1.0 : -0.9;
      }
    }
  }
  for (double& v : pert) v = g(rng);
  c->x = Bytes(x);
  c->hx = Bytes(hx);
  c->y = Bytes(y);
  c->r = Bytes(r);
  c->pert = Bytes(pert);
  Problem& p = c->problem;
  p.n = n;
  p.m = m;
  p.N = N;
  p.method = s.method;
  p.x = {ElementType::kFloat64, c->x};
  p.hx = {ElementType::kFloat64, c->hx};
  p.y = {ElementType::kFloat64, c->y};
  p.obs_error_kind = s.kind;
  p.obs_error = {ElementType::kFloat64, c->r};
  p.has_perturbations = s.method == Method::kStochastic && !s.seeded;
  p.perturbations = {ElementType::kFloat64, c->pert};
  p.seed = rng();
  p.inflation = s.inflation;
  p.relaxation = s.relaxation;
  p.relaxation_factor = s.alpha;
  p.form = s.form;
  return c;
}

std::vector<double> Values(ElementType dtype, const std::string& bytes) {
  const int64_t count = static_cast<int64_t>(bytes.size()) / ElementSize(dtype);
  std::vector<double> v(static_cast<size_t>(count));
  ToDouble(dtype, bytes.data(), count, v.data());
  return v;
}

// ||got - ref|| / ||ref||, NaN when anything is not finite (fails every check).
double RelL2(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::nan("");
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return std::nan("");
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

class AssimilateCuda : public ::gpucompute::testing::SharedDeviceTest {
 protected:
  // Runs the requests as one batch on the device, with `options`' paths forced.
  // `in_place_bytes`: where to put the input bytes the GPU copied where they were.
  absl::StatusOr<std::vector<Output>> Run(ElementType dtype,
                                          const std::vector<std::shared_ptr<Request>>& requests,
                                          const EnqueueOptions& options = {},
                                          int64_t* in_place_bytes = nullptr) {
    Batch batch;
    batch.dtype = dtype;
    for (const auto& r : requests) {
      r->dtype = dtype;
      batch.requests.push_back(r);
    }
    StreamSlot* slot = device().AcquireSlot();
    auto pending = EnqueueAssimilate(device(), *slot, batch, &options);
    const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
    std::vector<Output> out;
    if (pending.ok() && err == cudaSuccess) out = UnpackAssimilate(*pending, *slot, batch);
    if (pending.ok() && in_place_bytes != nullptr) *in_place_bytes = pending->in_place_bytes;
    device().ReleaseSlot(slot);
    if (!pending.ok()) return pending.status();
    if (err != cudaSuccess) return absl::InternalError(cudaGetErrorString(err));
    return out;
  }

  // Every problem of `cases` in one request, GPU against the CPU reference (the analysis
  // increment Xa - X, the innovation means, the spread and the form).
  void ExpectMatchesCpu(ElementType dtype, const std::vector<std::unique_ptr<Case>>& cases,
                        const std::string& label, const EnqueueOptions& options = {}) {
    auto request = std::make_shared<Request>();
    for (const auto& c : cases) request->problems.push_back(c->problem);
    auto out = Run(dtype, {request}, options);
    ASSERT_TRUE(out.ok()) << label << ": " << out.status();
    ASSERT_EQ(out->size(), 1u);
    ASSERT_TRUE((*out)[0].status.ok()) << label << ": " << (*out)[0].status;
    ASSERT_EQ((*out)[0].problems.size(), cases.size());
    const double tol = dtype == ElementType::kFloat64 ? 1e-10 : 1e-4;
    for (size_t k = 0; k < cases.size(); ++k) {
      const Problem& p = cases[k]->problem;
      auto cpu = CpuAnalyse(p, static_cast<int64_t>(k), dtype);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      const ProblemResult& gpu = (*out)[0].problems[k];
      EXPECT_EQ(gpu.form, cpu->form) << label;
      const std::vector<double> x = Values(ElementType::kFloat64, cases[k]->x);
      std::vector<double> ga = Values(dtype, gpu.analysis), ca = Values(dtype, cpu->analysis);
      ASSERT_EQ(ga.size(), x.size()) << label;
      for (size_t i = 0; i < x.size(); ++i) {
        ga[i] -= x[i];
        ca[i] -= x[i];
      }
      const double rel = RelL2(ga, ca);
      EXPECT_LE(rel, tol) << label << " problem " << k << ": increment rel l2 " << rel;
      EXPECT_LE(RelL2(gpu.innovation_mean, cpu->innovation_mean), dtype == ElementType::kFloat64 ? 1e-12 : 1e-5)
          << label << " problem " << k;
      EXPECT_NEAR(gpu.analysis_spread, cpu->analysis_spread, tol * cpu->analysis_spread)
          << label << " problem " << k;
      EXPECT_GT(cpu->analysis_spread, 0);
    }
  }

};


const char* KindName(ObsErrorKind k) { return k == ObsErrorKind::kVariances ? "variances" : "covariance"; }

TEST(AssimilateCudaHost, RelL2FailsOnNan) {
  EXPECT_FALSE(RelL2({std::nan("")}, {1.0}) <= 1.0);
  EXPECT_LE(RelL2({1.0, 2.0}, {1.0, 2.0}), 0.0);
}

TEST_F(AssimilateCuda, WarmUp) { ASSERT_TRUE(WarmUpAssimilate(device()).ok()); }

// One problem of each variant (the plain routines: SYRK, POTRF, TRSM, SYEVD).
TEST_F(AssimilateCuda, EveryMethodKindFormDtype) {
  std::mt19937_64 rng(11);
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      for (ObsErrorKind kind : {ObsErrorKind::kVariances, ObsErrorKind::kCovariance}) {
        for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
          for (bool seeded : {false, true}) {
            if (method == Method::kEtkf && seeded) continue;
            Spec s;
            s.n = 57;
            s.m = 23;
            s.N = 13;
            s.method = method;
            s.kind = kind;
            s.form = form;
            s.seeded = seeded;
            s.inflation = 1.05;
            std::vector<std::unique_ptr<Case>> cases;
            cases.push_back(MakeCase(s, rng));
            ExpectMatchesCpu(dtype, cases,
                             absl::StrCat(ElementName(dtype), " ", MethodName(method), " ",
                                          KindName(kind), " ", FormName(form), seeded ? " seeded" : ""));
          }
        }
      }
    }
  }
}

// More members than observations and the other way round under kAuto, N > 32 (SYEVD even when
// batched), and N = 2.
TEST_F(AssimilateCuda, ShapesUnderAuto) {
  std::mt19937_64 rng(12);
  const int64_t shapes[][3] = {{40, 8, 30}, {20, 90, 6}, {64, 50, 40}, {5, 3, 2}, {1, 1, 2}};
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      for (const auto& sh : shapes) {
        Spec s;
        s.n = sh[0];
        s.m = sh[1];
        s.N = sh[2];
        s.method = method;
        std::vector<std::unique_ptr<Case>> cases;
        cases.push_back(MakeCase(s, rng));
        cases.push_back(MakeCase(s, rng));
        ExpectMatchesCpu(dtype, cases,
                         absl::StrCat(ElementName(dtype), " ", MethodName(method), " ", sh[0], "x", sh[1],
                                      "x", sh[2]));
      }
    }
  }
}

// Many small problems of one shape in one request: the batched routines (potrfBatched,
// trsmBatched, syevjBatched, strided GEMM), and the same through the per-problem loop.
TEST_F(AssimilateCuda, ManySmallProblemsBatched) {
  std::mt19937_64 rng(13);
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      for (ObsErrorKind kind : {ObsErrorKind::kVariances, ObsErrorKind::kCovariance}) {
        for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
          Spec s;
          s.n = 40;
          s.m = 40;
          s.N = 20;
          s.method = method;
          s.kind = kind;
          s.form = form;
          std::vector<std::unique_ptr<Case>> cases;
          for (int i = 0; i < 48; ++i) {
            s.seeded = method == Method::kStochastic && i % 2 == 1;
            s.inflation = 1.0 + 0.01 * (i % 5);
            cases.push_back(MakeCase(s, rng));
          }
          const std::string label = absl::StrCat(ElementName(dtype), " ", MethodName(method), " ",
                                                 KindName(kind), " ", FormName(form), " x48");
          ExpectMatchesCpu(dtype, cases, label + " batched");
          ExpectMatchesCpu(dtype, cases, label + " unbatched", {.force_unbatched = true});
          ExpectMatchesCpu(dtype, cases, label + " library path", {.no_fused = true});
        }
      }
    }
  }
}

// Seeded perturbations: the GPU draws the CPU's numbers. With R = I, no inflation and H = the
// state itself, the stochastic increment is linear in the perturbations, so a wrong draw shows.
// Member counts: odd (Philox pairs straddle rows), one and several draws per lane, more than 32
// pairs per row, and beyond the per-lane register cache (129).
TEST_F(AssimilateCuda, SeededPerturbationsEqualCpu) {
  std::mt19937_64 rng(14);
  for (int members : {13, 50, 101, 129}) {
    Spec s;
    s.n = 90;
    s.m = 70;
    s.N = members;
    s.method = Method::kStochastic;
    s.seeded = true;
    std::vector<std::unique_ptr<Case>> cases;
    cases.push_back(MakeCase(s, rng));
    ExpectMatchesCpu(ElementType::kFloat64, cases, absl::StrCat("float64 seeded N=", members));
  }
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    Spec s;
    s.n = 200;
    s.m = 150;
    s.N = 24;
    s.method = Method::kStochastic;
    s.seeded = true;
    std::vector<std::unique_ptr<Case>> cases;
    for (int i = 0; i < 3; ++i) cases.push_back(MakeCase(s, rng));
    ExpectMatchesCpu(dtype, cases, absl::StrCat(ElementName(dtype), " seeded"));
    // Another seed gives another analysis (the draw is used at all).
    auto a = std::make_shared<Request>(), b = std::make_shared<Request>();
    a->problems.push_back(cases[0]->problem);
    b->problems.push_back(cases[0]->problem);
    b->problems[0].seed ^= 1;
    auto out = Run(dtype, {a, b});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_GT(RelL2(Values(dtype, (*out)[0].problems[0].analysis), Values(dtype, (*out)[1].problems[0].analysis)),
              1e-6);
  }
}

TEST_F(AssimilateCuda, InflationAndRelaxation) {
  std::mt19937_64 rng(15);
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (Relaxation relax : {Relaxation::kRtpp, Relaxation::kRtps}) {
      for (Method method : {Method::kEtkf, Method::kStochastic}) {
        Spec s;
        s.n = 33;
        s.m = 17;
        s.N = 9;
        s.method = method;
        s.inflation = 1.2;
        s.relaxation = relax;
        s.alpha = 0.6;
        std::vector<std::unique_ptr<Case>> cases;
        cases.push_back(MakeCase(s, rng));
        cases.push_back(MakeCase(s, rng));
        ExpectMatchesCpu(dtype, cases, absl::StrCat(ElementName(dtype), " ", MethodName(method), " ",
                                                    RelaxationName(relax)));
      }
    }
  }
}

// Several requests and shapes in one batch: each request gets its own problems back.
TEST_F(AssimilateCuda, MixedBatch) {
  std::mt19937_64 rng(16);
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<std::shared_ptr<Request>> requests;
  for (int r = 0; r < 4; ++r) {
    auto req = std::make_shared<Request>();
    for (int k = 0; k < 3; ++k) {
      Spec s;
      s.n = 10 + 7 * k;
      s.m = 5 + 3 * r;
      s.N = 4 + (r + k) % 3;
      s.method = (r + k) % 2 ? Method::kStochastic : Method::kEtkf;
      s.kind = k == 2 ? ObsErrorKind::kCovariance : ObsErrorKind::kVariances;
      s.seeded = r == 3;
      cases.push_back(MakeCase(s, rng));
      req->problems.push_back(cases.back()->problem);
    }
    requests.push_back(req);
  }
  auto out = Run(ElementType::kFloat64, requests);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE((*out)[r].status.ok()) << (*out)[r].status;
    for (int k = 0; k < 3; ++k) {
      auto cpu = CpuAnalyse(requests[r]->problems[k], k, ElementType::kFloat64);
      ASSERT_TRUE(cpu.ok());
      const double rel = RelL2(Values(ElementType::kFloat64, (*out)[r].problems[k].analysis),
                               Values(ElementType::kFloat64, cpu->analysis));
      EXPECT_LE(rel, 1e-12) << "request " << r << " problem " << k;
    }
  }
}

TEST_F(AssimilateCuda, NonSpdRNamesTheProblemAndFailsOnlyItsRequest) {
  std::mt19937_64 rng(17);
  for (bool many : {false, true}) {
    for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
      Spec s;
      s.n = 12;
      s.m = 6;
      s.N = 5;
      s.kind = ObsErrorKind::kCovariance;
      std::vector<std::unique_ptr<Case>> cases;
      auto bad = std::make_shared<Request>(), good = std::make_shared<Request>();
      const int count = many ? 5 : 2;
      for (int k = 0; k < count; ++k) {
        s.bad_r = k == 1;
        cases.push_back(MakeCase(s, rng));
        bad->problems.push_back(cases.back()->problem);
        s.bad_r = false;
        cases.push_back(MakeCase(s, rng));
        good->problems.push_back(cases.back()->problem);
      }
      auto out = Run(dtype, {bad, good});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string((*out)[0].status.message()), HasSubstr("problems[1].obs_error"));
      EXPECT_THAT(std::string((*out)[0].status.message()), HasSubstr("not positive definite"));
      EXPECT_TRUE((*out)[0].problems.empty());
      ASSERT_TRUE((*out)[1].status.ok()) << (*out)[1].status;
      EXPECT_EQ((*out)[1].problems.size(), static_cast<size_t>(count));
      // The CPU says the same.
      auto cpu = CpuAnalyse(bad->problems[1], 1, dtype);
      EXPECT_EQ(cpu.status().message(), (*out)[0].status.message());
    }
  }
}

// The per-problem fused kernels (stochastic, diagonal R, ensemble space, N <= 32, shared memory
// <= 48 KiB: n = 40, N = 20 fits up to m = 129 in float64 for the warp kernel, m = 107 for the
// block kernel) and the one-pass state transform (N <= 64), at odd shapes (N = 2..32: every
// register tile K = ceil(N / 4) of the warp kernel, padded and not) and on both sides of each
// switch, with inflation and relaxation, client and seeded perturbations; the block kernel and
// the library path on the same cases.
TEST_F(AssimilateCuda, FusedKernelsAndTheirBoundaries) {
  std::mt19937_64 rng(19);
  struct Shape {
    int64_t n, m, N;
    int problems;
  };
  const Shape shapes[] = {{40, 40, 20, 37}, {41, 23, 13, 5}, {7, 3, 2, 3},     {1, 1, 2, 2},
                          {40, 107, 20, 4}, {40, 108, 20, 4}, {33, 29, 32, 3}, {33, 29, 33, 3},
                          {150, 60, 31, 2}, {130, 90, 50, 1}, {70, 80, 64, 2}, {70, 80, 65, 1},
                          {40, 129, 20, 3}, {40, 130, 20, 3}, {9, 70, 6, 3},   {100, 5, 10, 3},
                          {57, 33, 17, 4},  {3, 41, 27, 2},   {65, 64, 24, 3}, {29, 31, 29, 2}};
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (const Shape& sh : shapes) {
      for (Method method : {Method::kStochastic, Method::kEtkf}) {
        for (int variant = 0; variant < 3; ++variant) {  // plain; inflation + RTPP; seeded + RTPS
          Spec s;
          s.n = sh.n;
          s.m = sh.m;
          s.N = sh.N;
          s.method = method;
          s.form = Form::kEnsembleSpace;
          s.seeded = method == Method::kStochastic && variant == 2;
          s.inflation = variant == 0 ? 1.0 : 1.1;
          s.relaxation = variant == 1 ? Relaxation::kRtpp : variant == 2 ? Relaxation::kRtps : Relaxation::kNone;
          s.alpha = 0.4;
          std::vector<std::unique_ptr<Case>> cases;
          for (int k = 0; k < sh.problems; ++k) cases.push_back(MakeCase(s, rng));
          const std::string label =
              absl::StrCat(ElementName(dtype), " ", MethodName(method), " ", sh.n, "x", sh.m, "x", sh.N,
                           " x", sh.problems, " variant ", variant);
          ExpectMatchesCpu(dtype, cases, label);
          ExpectMatchesCpu(dtype, cases, label + " library path", {.no_fused = true});
          ExpectMatchesCpu(dtype, cases, label + " 4 rows per warp", {.rows_per_warp = 4});
          ExpectMatchesCpu(dtype, cases, label + " scalar 8 rows per warp", {.rows_per_warp = 8});
          ExpectMatchesCpu(dtype, cases, label + " block kernel",
                       {.small_kernel = SmallKernel::kBlockPerProblem});
        }
      }
    }
  }
}

// More rows than 64 x 2048: the one-pass state transform strides over tiles.
// ETKF eigendecompositions by the Jacobi kernel, the library and cuSOLVER's XsyevBatched, one
// and many problems,
// odd and even orders on both sides of N = 32 (threads) and N = 64 (the switch).
TEST_F(AssimilateCuda, EtkfEigenJacobiAndLibrary) {
  std::mt19937_64 rng(22);
  const int64_t shapes[][4] = {{60, 80, 50, 1}, {30, 40, 17, 3}, {20, 10, 33, 2}, {40, 40, 20, 9},
                               {70, 90, 64, 2}, {70, 90, 65, 1}, {10, 5, 2, 3}, {12, 30, 3, 2}};
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (const auto& sh : shapes) {
      Spec s;
      s.n = sh[0];
      s.m = sh[1];
      s.N = sh[2];
      s.method = Method::kEtkf;
      s.inflation = 1.05;
      std::vector<std::unique_ptr<Case>> cases;
      for (int k = 0; k < sh[3]; ++k) cases.push_back(MakeCase(s, rng));
      const std::string label =
          absl::StrCat(ElementName(dtype), " etkf ", sh[0], "x", sh[1], "x", sh[2], " x", sh[3]);
      // default (Newton-Schulz up to 64), library (SYEVD / syevjBatched), the Jacobi kernel,
      // XsyevBatched, Newton-Schulz's eigendecomposition fallback
      for (EigVariant v : {EigVariant::kAuto, EigVariant::kLibrary, EigVariant::kJacobi,
                           EigVariant::kBatchedSyev, EigVariant::kNewtonSchulzFallback}) {
        ExpectMatchesCpu(dtype, cases, absl::StrCat(label, " eig variant ", static_cast<int>(v)),
                         {.eig = v});
      }
    }
  }
}

// The Newton-Schulz ETKF transform (eig variant -1), its fallback (3) and the library (0)
// against the CPU on ill-conditioned G = (N-1) I + Yw^T Yw: small observation variances
// (cond(G) bounds up to ~1e7, beyond kEtkfNsMaxCondition: those problems take the fallback
// inside the default path) and fewer observations than members (an eigenvalue N - 1 of high
// multiplicity next to large ones), at the orders where the padding and tiling change.
TEST_F(AssimilateCuda, EtkfNewtonSchulzIllConditioned) {
  std::mt19937_64 rng(23);
  for (int64_t N : {2, 3, 8, 9, 31, 50, 64}) {
    for (double r_scale : {1.0, 1e-2, 1e-4, 1e-6}) {
      for (int64_t m : {N / 2 + 1, 3 * N}) {
        // There every path (the library's SYEVD too) is ~1e-9 from the CPU: forming G, not its
        // root, loses the digits.
        if (r_scale < 1e-5 && m < N) continue;
        Spec s;
        s.n = 40;
        s.m = m;
        s.N = N;
        s.method = Method::kEtkf;
        s.form = Form::kEnsembleSpace;
        s.r_scale = r_scale;
        s.inflation = 1.02;
        std::vector<std::unique_ptr<Case>> cases;
        for (int k = 0; k < 2; ++k) cases.push_back(MakeCase(s, rng));
        const std::string label = absl::StrCat("etkf N=", N, " m=", m, " r_scale=", r_scale);
        for (EigVariant v : {EigVariant::kAuto, EigVariant::kNewtonSchulzFallback, EigVariant::kLibrary}) {
          ExpectMatchesCpu(ElementType::kFloat64, cases,
                           absl::StrCat(label, " eig variant ", static_cast<int>(v)), {.eig = v});
        }
        if (r_scale >= 1e-2) ExpectMatchesCpu(ElementType::kFloat32, cases, absl::StrCat(label, " float32"));
      }
    }
  }
}

TEST_F(AssimilateCuda, FusedRowsManyTiles) {
  std::mt19937_64 rng(20);
  Spec s;
  s.n = 140001;
  s.m = 30;
  s.N = 10;
  s.method = Method::kStochastic;
  s.relaxation = Relaxation::kRtps;
  s.alpha = 0.5;
  std::vector<std::unique_ptr<Case>> cases;
  cases.push_back(MakeCase(s, rng));
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 140001");
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 140001, 4 rows per warp", {.rows_per_warp = 4});
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 140001, scalar 8 rows per warp", {.rows_per_warp = 8});
  s.relaxation = Relaxation::kRtpp;
  s.N = 37;
  s.n = 300007;  // more tiles than warps in the grid at 4 and at 8 rows per warp
  cases.clear();
  cases.push_back(MakeCase(s, rng));
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 300007");
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 300007, 4 rows per warp", {.rows_per_warp = 4});
  ExpectMatchesCpu(ElementType::kFloat64, cases, "n = 300007, scalar 8 rows per warp", {.rows_per_warp = 8});
}

// Blocked left triangular solves (one large ensemble-space problem), at block sizes that do and
// do not divide N, against the CPU and against one cuBLAS TRSM.
TEST_F(AssimilateCuda, BlockedTriangularSolves) {
  std::mt19937_64 rng(21);
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    Spec s;
    s.n = 90;
    s.m = 300;
    s.N = 150;
    s.method = Method::kStochastic;
    s.form = Form::kEnsembleSpace;
    std::vector<std::unique_ptr<Case>> cases;
    cases.push_back(MakeCase(s, rng));
    for (int nb : {0, 16, 32, 75}) {
      ExpectMatchesCpu(dtype, cases, absl::StrCat(ElementName(dtype), " trsm block ", nb), {.trsm_block = nb, .solve = SolveVariant::kTrsm});
    }
    for (int nb : {16, 32, 64, 75, 256}) {  // inverted diagonal blocks + GEMMs
      ExpectMatchesCpu(dtype, cases, absl::StrCat(ElementName(dtype), " block inverse ", nb), {.trsm_block = nb, .solve = SolveVariant::kBlockInverse});
    }
  }
}

// A problem whose arrays are copies in page-locked memory (where a GPU server's resident tensors
// live), freed with it.
class PinnedProblem {
 public:
  explicit PinnedProblem(Problem p) : problem_(std::move(p)) {
    for (ArrayView* a : {&problem_.x, &problem_.hx, &problem_.y, &problem_.obs_error, &problem_.perturbations}) {
      void* block = nullptr;
      EXPECT_EQ(cudaHostAlloc(&block, a->bytes.size(), cudaHostAllocPortable), cudaSuccess);
      std::memcpy(block, a->bytes.data(), a->bytes.size());
      blocks_.push_back(block);
      a->bytes = absl::string_view(static_cast<const char*>(block), a->bytes.size());
    }
  }
  ~PinnedProblem() {
    for (void* b : blocks_) cudaFreeHost(b);
  }
  PinnedProblem(const PinnedProblem&) = delete;
  PinnedProblem& operator=(const PinnedProblem&) = delete;
  const Problem& problem() const { return problem_; }

 private:
  Problem problem_;
  std::vector<void*> blocks_;
};

// Arrays of 1 MiB or more in page-locked memory go to the GPU where they are (2-D copies into
// the observation rows [HX | 0 | D]); the result is the packed path's and the CPU's, for a
// problem alone and for one sharing its group with a problem in plain memory.
TEST_F(AssimilateCuda, PageLockedInputsAreCopiedWhereTheyAre) {
  std::mt19937_64 rng(31);
  struct Variant {
    Method method;
    ObsErrorKind kind;
    bool seeded;
  };
  for (const Variant& v : {Variant{Method::kEtkf, ObsErrorKind::kVariances, false},
                           Variant{Method::kStochastic, ObsErrorKind::kCovariance, false},
                           Variant{Method::kStochastic, ObsErrorKind::kVariances, true}}) {
    Spec s;
    s.n = 400;  // every n x N, m x N and m x m array 1.28 MB
    s.m = 400;
    s.N = 400;
    s.method = v.method;
    s.kind = v.kind;
    s.seeded = v.seeded;
    auto plain = MakeCase(s, rng);
    auto other = MakeCase(s, rng);
    PinnedProblem pinned(plain->problem);
    const std::string label = absl::StrCat(v.method == Method::kEtkf ? "etkf" : "stochastic", " ",
                                           KindName(v.kind), v.seeded ? " seeded" : "");
    // Expected in-place bytes: X, HX (and D) as 2-D copies, a full R.
    const int64_t section = s.n * s.N * 8;
    const int64_t obs_rows = s.m * (v.method == Method::kStochastic ? 2 * s.N + 1 : s.N + 1) * 8;
    const int64_t expected = section + obs_rows + (v.kind == ObsErrorKind::kCovariance ? s.m * s.m * 8 : 0);
    for (bool shared_group : {false, true}) {
      auto request = std::make_shared<Request>();
      request->problems.push_back(pinned.problem());
      if (shared_group) request->problems.push_back(other->problem);
      int64_t in_place = 0;
      auto direct = Run(ElementType::kFloat64, {request}, {}, &in_place);
      EnqueueOptions pack_all;
      pack_all.pack_all = true;
      int64_t packed_in_place = -1;
      auto packed = Run(ElementType::kFloat64, {request}, pack_all, &packed_in_place);
      ASSERT_TRUE(direct.ok() && packed.ok()) << label;
      ASSERT_TRUE((*direct)[0].status.ok() && (*packed)[0].status.ok()) << label;
      EXPECT_EQ(in_place, expected) << label;
      EXPECT_EQ(packed_in_place, 0) << label;
      for (size_t k = 0; k < request->problems.size(); ++k) {
        EXPECT_LE(RelL2(Values(ElementType::kFloat64, (*direct)[0].problems[k].analysis),
                        Values(ElementType::kFloat64, (*packed)[0].problems[k].analysis)),
                  1e-13)
            << label << " problem " << k;
        EXPECT_EQ((*direct)[0].problems[k].innovation_mean, (*packed)[0].problems[k].innovation_mean) << label;
      }
      auto cpu = CpuAnalyse(pinned.problem(), 0, ElementType::kFloat64);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_LE(RelL2(Values(ElementType::kFloat64, (*direct)[0].problems[0].analysis),
                      Values(ElementType::kFloat64, cpu->analysis)),
                1e-10)
          << label;
    }
    // Computed in float32, float64 arrays are converted, so packed.
    auto request = std::make_shared<Request>();
    request->problems.push_back(pinned.problem());
    int64_t in_place = -1;
    ASSERT_TRUE(Run(ElementType::kFloat32, {request}, {}, &in_place).ok());
    EXPECT_EQ(in_place, 0) << label;
  }
}

TEST(AssimilateCudaBackend, RunAssimilate) {
  SKIP_WITHOUT_CUDA_DEVICE();
  CompletionQueue completions;
  BackendOptions o;
  o.kind = "cuda";
  o.streams_per_device = 2;
  auto backend = CreateBackend(o, &completions);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::mt19937_64 rng(18);
  Spec s;
  s.n = 100;
  s.m = 60;
  s.N = 16;
  s.method = Method::kStochastic;
  s.seeded = true;
  auto c = MakeCase(s, rng);
  auto request = std::make_shared<Request>();
  request->dtype = ElementType::kFloat64;
  request->problems.push_back(c->problem);
  auto batch = std::make_shared<Batch>();
  batch->dtype = ElementType::kFloat64;
  batch->requests.push_back(request);
  absl::Notification done;
  std::vector<Output> out;
  (*backend)->RunAssimilate(batch, [&](absl::StatusOr<std::vector<Output>> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) out = *std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].status.ok()) << out[0].status;
  auto cpu = CpuAnalyse(c->problem, 0, ElementType::kFloat64);
  ASSERT_TRUE(cpu.ok());
  EXPECT_LE(RelL2(Values(ElementType::kFloat64, out[0].problems[0].analysis),
                  Values(ElementType::kFloat64, cpu->analysis)),
            1e-12);
}

}  // namespace
}  // namespace gpucompute::assimilate
