// Assimilate through a real server on loopback: ETKF and stochastic EnKF against the Kalman
// update computed here (explicit gain, LU solves), concurrent callers batched and each given
// exactly its own analyses, a bad problem failing only its own request, bad input answered
// precisely with the next request served, ServerInfo's limits and batching statistics.
// The backend is $GPUCOMPUTE_TEST_BACKEND (default cpu; the GPU machine runs it with cuda).
#include <lapacke.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <vector>

#include <grpcpp/create_channel.h>

#include "gmock/gmock.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/runtime/backend.h"
#include "server/server.h"
#include "tests/integration/loopback_server.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using Matrix = std::vector<double>;

v1::Tensor Tensor(const Matrix& values, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(v1::FLOAT64);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8));
  return t;
}

Matrix Values(const v1::Tensor& t) {
  EXPECT_EQ(t.dtype(), v1::FLOAT64);
  Matrix v(t.data().size() / 8);
  std::memcpy(v.data(), t.data().data(), v.size() * 8);
  return v;
}

// A linear-H problem: X (n x N), H (m x n), HX = H X, y, diagonal R.
struct Case {
  int64_t n, m, N;
  Matrix x, h, hx, y, r;
};

Case RandomCase(std::mt19937_64& rng, int64_t n, int64_t m, int64_t N) {
  std::normal_distribution<double> g(0, 1);
  Case c{n, m, N, Matrix(n * N), Matrix(m * n), Matrix(m * N, 0.0), Matrix(m), Matrix(m)};
  for (int64_t i = 0; i < n; ++i) {
    const double mu = 2 * g(rng);
    for (int64_t j = 0; j < N; ++j) c.x[i * N + j] = mu + g(rng);
  }
  for (double& v : c.h) v = g(rng) / std::sqrt(double(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t j = 0; j < N; ++j) c.hx[i * N + j] += c.h[i * n + k] * c.x[k * N + j];
    }
  }
  for (double& v : c.y) v = 2 * g(rng);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (double& v : c.r) v = u(rng);
  return c;
}

v1::AssimilationProblem Problem(const Case& c, v1::AssimilationMethod method, const Matrix& pert = {}) {
  v1::AssimilationProblem p;
  *p.mutable_x() = Tensor(c.x, {c.n, c.N});
  *p.mutable_hx() = Tensor(c.hx, {c.m, c.N});
  *p.mutable_y() = Tensor(c.y, {c.m});
  *p.mutable_obs_error_variance() = Tensor(c.r, {c.m});
  p.set_method(method);
  if (!pert.empty()) *p.mutable_perturbations() = Tensor(pert, {c.m, c.N});
  return p;
}

// The gain K = P H^T (H P H^T + R)^-1 of the prior sample covariance P (N - 1).
Matrix Gain(const Case& c) {
  const int64_t n = c.n, m = c.m, N = c.N;
  Matrix mean(n, 0.0), a(n * N), p(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < N; ++j) mean[i] += c.x[i * N + j] / N;
    for (int64_t j = 0; j < N; ++j) a[i * N + j] = c.x[i * N + j] - mean[i];
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t j = 0; j < N; ++j) p[i * n + k] += a[i * N + j] * a[k * N + j] / (N - 1);
    }
  }
  Matrix pht(n * m, 0.0), s(m * m, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t k = 0; k < n; ++k) pht[i * m + o] += p[i * n + k] * c.h[o * n + k];
    }
  }
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t q = 0; q < m; ++q) {
      for (int64_t k = 0; k < n; ++k) s[o * m + q] += c.h[o * n + k] * pht[k * m + q];
    }
    s[o * m + o] += c.r[o];
  }
  // K^T = S^-1 (P H^T)^T.
  Matrix kt(m * n);
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t i = 0; i < n; ++i) kt[o * n + i] = pht[i * m + o];
  }
  std::vector<lapack_int> piv(m);
  EXPECT_EQ(LAPACKE_dgesv(LAPACK_ROW_MAJOR, m, n, s.data(), m, piv.data(), kt.data(), n), 0);
  Matrix k(n * m);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) k[i * m + o] = kt[o * n + i];
  }
  return k;
}

// Perturbed-observation update of every member with gain K: x_j + K (y + e_j - HX_j).
// With e = 0 and averaged over members it is the Kalman mean update.
Matrix EnkfReference(const Case& c, const Matrix& e) {
  const Matrix k = Gain(c);
  Matrix out = c.x;
  for (int64_t j = 0; j < c.N; ++j) {
    for (int64_t i = 0; i < c.n; ++i) {
      for (int64_t o = 0; o < c.m; ++o) {
        out[i * c.N + j] += k[i * c.m + o] * (c.y[o] + e[o * c.N + j] - c.hx[o * c.N + j]);
      }
    }
  }
  return out;
}

double MaxDiff(const Matrix& a, const Matrix& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::isfinite(a[i]) ? std::abs(a[i] - b[i]) : INFINITY);
  return d;
}

Matrix RowMeans(const Matrix& e, int64_t n, int64_t N) {
  Matrix m(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < N; ++j) m[i] += e[i * N + j] / N;
  }
  return m;
}

class AssimilateServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::TestBackend() == "cuda" && !CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
    ServerConfig c = testing::LoopbackConfig();
    c.assimilate_scheduler.max_queue_delay = absl::Milliseconds(2);
    c.limits.assimilate.max_members = 64;
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
  }

  grpc::Status Call(const v1::AssimilateRequest& request, v1::AssimilateResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return loopback_.stub->Assimilate(&ctx, request, response);
  }

  testing::LoopbackServer loopback_;
};

TEST_F(AssimilateServer, EtkfAndEnkfMatchTheKalmanUpdate) {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> g(0, 1);
  const Case etkf = RandomCase(rng, 14, 9, 12);
  const Case enkf = RandomCase(rng, 10, 16, 7);
  Matrix e(enkf.m * enkf.N);
  for (double& v : e) v = g(rng);
  v1::AssimilateRequest request;
  *request.add_problems() = Problem(etkf, v1::ASSIMILATION_METHOD_ETKF);
  *request.add_problems() = Problem(enkf, v1::ASSIMILATION_METHOD_ENKF, e);
  v1::AssimilateResponse response;
  ASSERT_TRUE(Call(request, &response).ok());
  ASSERT_EQ(response.results_size(), 2);

  // ETKF: the analysis mean is the Kalman mean (the zero-perturbation member average).
  const Matrix xa = Values(response.results(0).analysis());
  ASSERT_EQ(response.results(0).analysis().shape(0), etkf.n);
  ASSERT_EQ(response.results(0).analysis().shape(1), etkf.N);
  const Matrix want_mean = RowMeans(EnkfReference(etkf, Matrix(etkf.m * etkf.N, 0.0)), etkf.n, etkf.N);
  EXPECT_LE(MaxDiff(RowMeans(xa, etkf.n, etkf.N), want_mean), 1e-10);
  EXPECT_GT(response.results(0).analysis_spread(), 0);
  // Stochastic EnKF with given perturbations: the formula member by member.
  EXPECT_LE(MaxDiff(Values(response.results(1).analysis()), EnkfReference(enkf, e)), 1e-10);
  // Innovation means.
  const Matrix ybar = RowMeans(enkf.hx, enkf.m, enkf.N);
  const Matrix innov = Values(response.results(1).innovation_mean());
  for (int64_t o = 0; o < enkf.m; ++o) EXPECT_NEAR(innov[o], enkf.y[o] - ybar[o], 1e-12);
}

TEST_F(AssimilateServer, ConcurrentCallersAreBatchedAndGetTheirOwnAnalyses) {
  std::mt19937_64 rng(22);
  const int kCallers = 24;
  std::vector<v1::AssimilateRequest> requests(kCallers);
  std::vector<Matrix> alone(kCallers);
  for (int i = 0; i < kCallers; ++i) {
    const Case c = RandomCase(rng, 20 + i, 10 + i % 5, 4 + i % 7);
    v1::AssimilationProblem p = Problem(c, i % 2 ? v1::ASSIMILATION_METHOD_ENKF : v1::ASSIMILATION_METHOD_ETKF);
    if (i % 2) p.set_seed(1000 + i);
    *requests[i].add_problems() = p;
    v1::AssimilateResponse r;
    ASSERT_TRUE(Call(requests[i], &r).ok());
    alone[i] = Values(r.results(0).analysis());
  }
  const v1::ServerInfoResponse before = [&] {
    grpc::ClientContext ctx;
    v1::ServerInfoResponse info;
    EXPECT_TRUE(loopback_.stub->ServerInfo(&ctx, v1::ServerInfoRequest(), &info).ok());
    return info;
  }();
  std::vector<std::future<std::pair<grpc::Status, v1::AssimilateResponse>>> calls;
  for (int i = 0; i < kCallers; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      v1::AssimilateResponse r;
      grpc::Status s = Call(requests[i], &r);
      return std::make_pair(s, r);
    }));
  }
  for (int i = 0; i < kCallers; ++i) {
    auto [status, response] = calls[i].get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    // What the same request gave alone (server-drawn perturbations included), to rounding: in
    // a batch the GPU may group problems into batched library calls.
    const Matrix got = Values(response.results(0).analysis());
    ASSERT_EQ(got.size(), alone[i].size()) << "caller " << i;
    double diff = 0, norm = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      diff += (got[j] - alone[i][j]) * (got[j] - alone[i][j]);
      norm += alone[i][j] * alone[i][j];
    }
    EXPECT_LE(std::sqrt(diff), 1e-12 * std::sqrt(norm)) << "caller " << i;
  }
  grpc::ClientContext ctx;
  v1::ServerInfoResponse after;
  ASSERT_TRUE(loopback_.stub->ServerInfo(&ctx, v1::ServerInfoRequest(), &after).ok());
  EXPECT_EQ(after.assimilate_batching().requests() - before.assimilate_batching().requests(), kCallers);
  EXPECT_EQ(after.assimilate_limits().max_members(), 64);
  EXPECT_GT(after.assimilate_limits().max_problems_per_request(), 0);
}

TEST_F(AssimilateServer, ABadProblemFailsOnlyItsOwnRequest) {
  std::mt19937_64 rng(23);
  const Case c = RandomCase(rng, 8, 3, 6);
  v1::AssimilateRequest good, bad;
  *good.add_problems() = Problem(c, v1::ASSIMILATION_METHOD_ETKF);
  v1::AssimilationProblem p = Problem(c, v1::ASSIMILATION_METHOD_ETKF);
  // Symmetric with a positive diagonal, but indefinite: only the Cholesky factorisation on the
  // backend finds it, after the scheduler may have batched it with good requests.
  *p.mutable_obs_error_covariance() = Tensor({1, 2, 0, 2, 1, 0, 0, 0, 1}, {3, 3});
  *bad.add_problems() = Problem(c, v1::ASSIMILATION_METHOD_ETKF);
  *bad.add_problems() = p;
  std::vector<std::future<std::pair<grpc::Status, v1::AssimilateResponse>>> calls;
  for (int i = 0; i < 16; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      v1::AssimilateResponse r;
      grpc::Status s = Call(i % 4 == 0 ? bad : good, &r);
      return std::make_pair(s, r);
    }));
  }
  for (int i = 0; i < 16; ++i) {
    auto [status, response] = calls[i].get();
    if (i % 4 == 0) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(status.error_message(), HasSubstr("problems[1].obs_error"));
      EXPECT_THAT(status.error_message(), HasSubstr("not positive definite"));
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.results_size(), 1);
    }
  }
}

TEST_F(AssimilateServer, BadInputIsAnsweredPreciselyAndTheNextRequestServed) {
  std::mt19937_64 rng(24);
  const Case c = RandomCase(rng, 6, 4, 5);
  v1::AssimilateRequest good;
  *good.add_problems() = Problem(c, v1::ASSIMILATION_METHOD_ETKF);
  struct BadCase {
    std::function<void(v1::AssimilationProblem*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const BadCase cases[] = {
      {[&](v1::AssimilationProblem* p) { *p->mutable_hx() = Tensor(Matrix(4 * 3, 0.0), {4, 3}); },
       grpc::StatusCode::INVALID_ARGUMENT, "problems[0].hx.shape[1] is 3 but x.shape[1] (members) is 5"},
      {[&](v1::AssimilationProblem* p) {
         *p->mutable_x() = Tensor(Matrix(6, 0.0), {6, 1});
         *p->mutable_hx() = Tensor(Matrix(4, 0.0), {4, 1});
       },
       grpc::StatusCode::INVALID_ARGUMENT, "at least 2 members (got 1)"},
      {[&](v1::AssimilationProblem* p) {
         Matrix y = c.y;
         y[2] = NAN;
         *p->mutable_y() = Tensor(y, {4});
       },
       grpc::StatusCode::INVALID_ARGUMENT, "problems[0].y: values must be finite (y[2] is nan)"},
      {[&](v1::AssimilationProblem* p) { p->mutable_x()->mutable_data()->resize(7); },
       grpc::StatusCode::INVALID_ARGUMENT, "problems[0].x.data: holds 7 bytes"},
      {[&](v1::AssimilationProblem* p) {
         *p->mutable_x() = Tensor(Matrix(6 * 65, 0.0), {6, 65});
         *p->mutable_hx() = Tensor(Matrix(4 * 65, 0.0), {4, 65});
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "65 members; the limit is 64"},
  };
  for (const BadCase& b : cases) {
    v1::AssimilateRequest request = good;
    b.mutate(request.mutable_problems(0));
    v1::AssimilateResponse response;
    const grpc::Status s = Call(request, &response);
    EXPECT_EQ(s.error_code(), b.code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(b.message));
    v1::AssimilateResponse ok;
    EXPECT_TRUE(Call(good, &ok).ok());
    EXPECT_EQ(ok.results_size(), 1);
  }
}

// The LETKF with a step taper reaching every observation is the global ETKF of the same
// server (either backend).
TEST_F(AssimilateServer, LetkfReachingEveryObservationIsTheEtkf) {
  std::mt19937_64 rng(24);
  const Case c = RandomCase(rng, 11, 7, 6);
  v1::AssimilateRequest local, global;
  *local.add_problems() = Problem(c, v1::ASSIMILATION_METHOD_LETKF);
  *global.add_problems() = Problem(c, v1::ASSIMILATION_METHOD_ETKF);
  v1::Localization& l = *local.mutable_problems(0)->mutable_localization();
  Matrix state(c.n), obs(c.m);
  for (int64_t i = 0; i < c.n; ++i) state[i] = static_cast<double>(i);
  for (int64_t j = 0; j < c.m; ++j) obs[j] = 1.5 * static_cast<double>(j);
  *l.mutable_state_coords() = Tensor(state, {c.n, 1});
  *l.mutable_obs_coords() = Tensor(obs, {c.m, 1});
  l.set_radius(1000);
  l.set_taper(v1::LOCALIZATION_TAPER_STEP);
  v1::AssimilateResponse a, b;
  const grpc::Status s = Call(local, &a);
  ASSERT_TRUE(Call(global, &b).ok());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LE(MaxDiff(Values(a.results(0).analysis()), Values(b.results(0).analysis())), 1e-10);
  EXPECT_NEAR(a.results(0).analysis_spread(), b.results(0).analysis_spread(), 1e-12);
}

}  // namespace
}  // namespace gpucompute
