// Assimilate benchmarks on the GPU: device time (CUDA events around the analysis alone: after
// the copy in, before the copy out) at the shapes, median of several runs, and the
// host-timed whole call (packing, conversion, copies, analysis, unpacking). JSON lines.
//
//   assimilate_bench [--quick] [--variants] [--only=LABEL_SUBSTRING]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/element_type.h"
#include "server/ops/assimilate/cuda_assimilate.h"
#include "server/device/cuda_resources.h"
#include "server/device/device_context.h"

namespace gpucompute::assimilate {
namespace {

using Clock = std::chrono::steady_clock;

void Die(const absl::Status& s) {
  std::fprintf(stderr, "assimilate_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string label;
  int64_t problems, n, m, N;
  ElementType dtype;
  Method method;
  bool seeded = false;
  Form form = Form::kAuto;
  double target_ms = 0;  // the "Done when" (0: none)
  int reps = 10;
  EnqueueOptions knobs;  // the path switches (events and marks are set per run)
};

// Random data in the compute dtype (as a client would send it): X ~ offset + N(0,1), HX the
// first m state rows plus noise (the peers' construction), y ~ N(0, 1), R = r I.
struct Data {
  std::string x, hx, y, r, pert;
};

std::string Encode(const std::vector<double>& v, ElementType t) {
  std::string s(v.size() * ElementSize(t), '\0');
  if (t == ElementType::kFloat64) {
    std::memcpy(s.data(), v.data(), s.size());
  } else {
    auto* f = reinterpret_cast<float*>(s.data());
    for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  }
  return s;
}

Data MakeData(const Case& c, uint64_t seed, double r) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> x(c.n * c.N), hx(c.m * c.N), y(c.m), rv(c.m, r), e(c.m * c.N);
  for (double& v : x) v = g(rng);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.N; ++j) hx[i * c.N + j] = x[(i % c.n) * c.N + j] + 0.1 * g(rng);
  }
  for (double& v : y) v = g(rng);
  for (double& v : e) v = std::sqrt(r) * g(rng);
  Data d;
  d.x = Encode(x, c.dtype);
  d.hx = Encode(hx, c.dtype);
  d.y = Encode(y, c.dtype);
  d.r = Encode(rv, c.dtype);
  d.pert = Encode(e, c.dtype);
  return d;
}

void RunCase(DeviceContext& device, const Case& c) {
  // Distinct data for each of up to 4 problems, reused round-robin across a large batch (the
  // device still sees P separate copies).
  const int distinct = static_cast<int>(std::min<int64_t>(c.problems, 4));
  std::vector<Data> data;
  for (int i = 0; i < distinct; ++i) data.push_back(MakeData(c, 100 + i, c.n == 3000 ? 0.1 : 1.0));
  auto request = std::make_shared<Request>();
  request->dtype = c.dtype;
  for (int64_t k = 0; k < c.problems; ++k) {
    const Data& d = data[static_cast<size_t>(k % distinct)];
    Problem p;
    p.n = c.n;
    p.m = c.m;
    p.N = c.N;
    p.method = c.method;
    p.x = {c.dtype, d.x};
    p.hx = {c.dtype, d.hx};
    p.y = {c.dtype, d.y};
    p.obs_error_kind = ObsErrorKind::kVariances;
    p.obs_error = {c.dtype, d.r};
    p.has_perturbations = c.method == Method::kStochastic && !c.seeded;
    p.perturbations = {c.dtype, d.pert};
    p.seed = 7 + static_cast<uint64_t>(k);
    p.form = c.form;
    request->problems.push_back(p);
  }
  Batch batch;
  batch.dtype = c.dtype;
  batch.requests.push_back(request);
  const Form form = ChooseForm(request->problems[0], Limits{});

  auto before = CudaEvent::Create();
  auto after = CudaEvent::Create();
  auto start = CudaEvent::Create();
  auto end = CudaEvent::Create();
  if (!before.ok()) Die(before.status());
  if (!after.ok()) Die(after.status());
  if (!start.ok() || !end.ok()) Die(absl::InternalError("events"));
  StreamSlot* slot = device.AcquireSlot();
  std::vector<double> device_ms, host_ms;
  // Where the whole call's time goes, per rep: packing on the host (with the launches), the
  // copy in, the analysis, the copy out (device events) and unpacking on the host.
  std::vector<double> pack_ms, copy_in_ms, copy_out_ms, unpack_ms;
  double spread = 0;
  for (int rep = 0; rep < c.reps + 1; ++rep) {  // the first is a warm-up
    EnqueueOptions options = c.knobs;
    options.before = before->get();
    options.after = after->get();
    const auto t0 = Clock::now();
    cudaEventRecord(start->get(), slot->stream.get());
    auto pending = EnqueueAssimilate(device, *slot, batch, &options);
    if (!pending.ok()) Die(pending.status());
    const auto t1 = Clock::now();
    cudaEventRecord(end->get(), slot->stream.get());
    const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
    if (err != cudaSuccess) Die(CudaErrorStatus(err, "sync", __FILE__, __LINE__));
    const auto t2 = Clock::now();
    auto out = UnpackAssimilate(*pending, *slot, batch);
    const auto t3 = Clock::now();
    const double host = std::chrono::duration<double, std::milli>(t3 - t0).count();
    auto event_ms = [](const CudaEvent& a, const CudaEvent& b) {
      float ms = 0;
      cudaEventElapsedTime(&ms, a.get(), b.get());
      return static_cast<double>(ms);
    };
    if (rep > 0) {
      pack_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      copy_in_ms.push_back(event_ms(*start, *before));  // also waits for the packing to finish
      copy_out_ms.push_back(event_ms(*after, *end));
      unpack_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
    if (!out[0].status.ok()) Die(out[0].status);
    spread = out[0].problems[0].analysis_spread;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, before->get(), after->get()) != cudaSuccess) Die(absl::InternalError("event"));
    if (rep > 0) {
      device_ms.push_back(ms);
      host_ms.push_back(host);
    }
  }
  // One more run with an event after each step: where the time goes (these events add a little).
  std::string stages;
  {
    std::vector<std::pair<const char*, cudaEvent_t>> marks;
    EnqueueOptions options = c.knobs;
    options.before = before->get();
    options.marks = &marks;
    auto pending = EnqueueAssimilate(device, *slot, batch, &options);
    if (!pending.ok()) Die(pending.status());
    if (cudaStreamSynchronize(slot->stream.get()) != cudaSuccess) Die(absl::InternalError("sync"));
    cudaEvent_t prev = before->get();
    for (const auto& [name, e] : marks) {
      float ms = 0;
      cudaEventElapsedTime(&ms, prev, e);
      absl::StrAppendFormat(&stages, "%s\"%s\":%.4f", stages.empty() ? "" : ",", name, ms);
      prev = e;
    }
    for (const auto& [name, e] : marks) cudaEventDestroy(e);
  }
  device.ReleaseSlot(slot);
  const double dev = Median(device_ms);
  const int es = ElementSize(c.dtype);
  // Fewest bytes: read X, HX (and E), write Xa, per problem.
  const double bytes = static_cast<double>(c.problems) *
                       (2.0 * c.n * c.N + c.m * c.N * (c.method == Method::kStochastic && !c.seeded ? 2 : 1)) * es;
  std::printf("%s\n",
              absl::StrFormat(
                  "{\"what\":\"assimilate cuda\",\"case\":\"%s\",\"problems\":%d,\"n\":%d,\"m\":%d,\"N\":%d,"
                  "\"dtype\":\"%s\",\"method\":\"%s\",\"perturbations\":\"%s\",\"form\":\"%s\","
                  "\"device_ms\":%.4f,\"device_ms_min\":%.4f,\"host_ms\":%.2f,\"gbps_floor_bytes\":%.1f,"
                  "\"target_ms\":%g,\"meets_target\":%s,\"spread0\":%.6g,\"reps\":%d,\"stages_ms\":{%s},"
                  "\"host_stages_ms\":{\"pack_and_enqueue\":%.2f,\"copy_in_from_start\":%.2f,"
                  "\"copy_out\":%.2f,\"unpack\":%.2f}}",
                  c.label, c.problems, c.n, c.m, c.N, ElementName(c.dtype), MethodName(c.method),
                  c.method == Method::kEtkf ? "none" : (c.seeded ? "seeded" : "client"), FormName(form), dev,
                  *std::min_element(device_ms.begin(), device_ms.end()), Median(host_ms), bytes / dev / 1e6,
                  c.target_ms, c.target_ms == 0 ? "null" : (dev <= c.target_ms ? "true" : "false"), spread,
                  c.reps, stages, Median(pack_ms), Median(copy_in_ms), Median(copy_out_ms),
                  Median(unpack_ms))
                  .c_str());
  std::fflush(stdout);
}

}  // namespace
}  // namespace gpucompute::assimilate

int main(int argc, char** argv) {
  using namespace gpucompute;
  using namespace gpucompute::assimilate;
  bool quick = false, variants = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    if (a == "--variants") variants = true;
    if (a.rfind("--only=", 0) == 0) only = a.substr(7);
  }
  DeviceContext::Options o;
  o.streams = 1;
  auto device = DeviceContext::Create(o);
  if (!device.ok()) Die(device.status());
  if (auto s = WarmUpAssimilate(**device); !s.ok()) Die(s);
  const auto f64 = ElementType::kFloat64, f32 = ElementType::kFloat32;
  const auto etkf = Method::kEtkf, enkf = Method::kStochastic;
  std::vector<Case> cases = {
      {"seed n=m=N=3000", 1, 3000, 3000, 3000, f64, enkf, false, Form::kAuto, 6.0, 10},
      {"seed n=m=N=3000", 1, 3000, 3000, 3000, f32, enkf, false, Form::kAuto, 6.0, 10},
      {"seed n=m=N=3000 ensemble", 1, 3000, 3000, 3000, f64, enkf, false, Form::kEnsembleSpace, 0, 5},
      {"seed n=m=N=3000 observation", 1, 3000, 3000, 3000, f64, enkf, false, Form::kObservationSpace, 0, 5},
      {"large n=1e6 m=1e5 N=50", 1, 1000000, 100000, 50, f64, etkf, false, Form::kAuto, 1.0, 5},
      {"large n=1e6 m=1e5 N=50", 1, 1000000, 100000, 50, f64, enkf, false, Form::kAuto, 1.0, 5},
      {"large n=1e6 m=1e5 N=50", 1, 1000000, 100000, 50, f64, enkf, true, Form::kAuto, 1.0, 5},
      {"10000 small n=m=40 N=20", 10000, 40, 40, 20, f64, enkf, false, Form::kAuto, 0.5, 20},
      {"10000 small n=m=40 N=20", 10000, 40, 40, 20, f64, enkf, true, Form::kAuto, 0.5, 20},
      {"10000 small n=m=40 N=20", 10000, 40, 40, 20, f64, etkf, false, Form::kAuto, 0, 20},
  };
  // --variants: the 3000 case at other triangular-solve blocks, the large and small cases on the
  // library path (what the fused kernels replaced).
  if (variants) {
    for (ElementType dt : {f64, f32}) {
      Case c{"variant 3000 two TRSMs", 1, 3000, 3000, 3000, dt, enkf, false, Form::kAuto, 0, 5};
      c.knobs.solve = SolveVariant::kTrsm;
      cases.push_back(c);
      for (int nb : {256, 1024}) {
        Case v{absl::StrCat("variant 3000 block inverse ", nb), 1, 3000, 3000, 3000, dt, enkf, false, Form::kAuto, 0, 5};
        v.knobs.solve = SolveVariant::kBlockInverse;
        v.knobs.trsm_block = nb;
        cases.push_back(v);
      }
    }
    Case le{"variant large etkf eig library", 1, 1000000, 100000, 50, f64, etkf, false, Form::kAuto, 0, 5};
    le.knobs.eig = EigVariant::kLibrary;
    cases.push_back(le);
    Case lx{"variant large etkf eig XsyevBatched", 1, 1000000, 100000, 50, f64, etkf, false, Form::kAuto, 0, 5};
    lx.knobs.eig = EigVariant::kBatchedSyev;
    cases.push_back(lx);
    Case sx{"variant small etkf eig XsyevBatched", 10000, 40, 40, 20, f64, etkf, false, Form::kAuto, 0, 20};
    sx.knobs.eig = EigVariant::kBatchedSyev;
    cases.push_back(sx);
    Case lg{"variant large no_fused", 1, 1000000, 100000, 50, f64, enkf, false, Form::kAuto, 0, 5};
    lg.knobs.no_fused = true;
    cases.push_back(lg);
    for (bool seeded : {false, true}) {
      Case r4{"variant large rows_per_warp=4", 1, 1000000, 100000, 50, f64, enkf, seeded, Form::kAuto, 0, 5};
      r4.knobs.rows_per_warp = 4;
      cases.push_back(r4);
    }
    for (Method method : {etkf, enkf}) {
      Case r8{"variant large scalar rows_per_warp=8", 1, 1000000, 100000, 50, f64, method, false, Form::kAuto, 0, 5};
      r8.knobs.rows_per_warp = 8;
      cases.push_back(r8);
    }
    Case se{"variant small etkf eig library", 10000, 40, 40, 20, f64, etkf, false, Form::kAuto, 0, 20};
    se.knobs.eig = EigVariant::kLibrary;
    cases.push_back(se);
    Case sj{"variant small etkf eig Jacobi kernel", 10000, 40, 40, 20, f64, etkf, false, Form::kAuto, 0, 20};
    sj.knobs.eig = EigVariant::kJacobi;
    cases.push_back(sj);
    Case lf{"variant large etkf Newton-Schulz fallback forced", 1, 1000000, 100000, 50, f64, etkf, false, Form::kAuto, 0, 5};
    lf.knobs.eig = EigVariant::kNewtonSchulzFallback;
    cases.push_back(lf);
    for (bool seeded : {false, true}) {
      Case sb{"variant small block kernel", 10000, 40, 40, 20, f64, enkf, seeded, Form::kAuto, 0, 20};
      sb.knobs.small_kernel = SmallKernel::kBlockPerProblem;
      cases.push_back(sb);
    }
    Case sm{"variant small no_fused", 10000, 40, 40, 20, f64, enkf, false, Form::kAuto, 0, 20};
    sm.knobs.no_fused = true;
    cases.push_back(sm);
  }
  for (Case& c : cases) {
    if (!only.empty() && c.label.find(only) == std::string::npos) continue;
    if (quick) c.reps = std::min(c.reps, 3);
    RunCase(**device, c);
  }
  return 0;
}
