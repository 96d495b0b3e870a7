// Random requests for each operation, built with the client library's builders.
#include "client/load/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "client/cpp/assimilation_request.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/tensor_util.h"
#include "client/load/wire.h"
#include "common/status_macros.h"

namespace gpucompute::load {
namespace {

// Uniform in [-a, a): variance a^2 / 3. Cheap enough for GiB-sized models.
std::vector<float> UniformFloats(int64_t n, float a, FastRng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>((2.0 * rng.Uniform() - 1.0) * a);
  return v;
}

int64_t GridSize(const v1::FrequencyGrid& grid) {
  if (grid.has_uniform()) return grid.uniform().n();
  if (grid.has_explicit_frequencies()) {
    int64_t n = 1;
    for (int64_t d : grid.explicit_frequencies().shape()) n *= d;
    return n;
  }
  return 0;  // automatic: unknown here (gpucompute-load never sends one)
}

absl::StatusOr<v1::SubmitRequest> MakePeriodogram(const PeriodogramParams& p, v1::DType dtype,
                                                  uint64_t seed) {
  FastRng rng(seed);
  client::PeriodogramRequestBuilder builder;
  for (int64_t s = 0; s < p.series; ++s) {
    std::vector<double> t(static_cast<size_t>(p.samples)), y(t.size()), dy(t.size());
    for (double& v : t) v = 100.0 * rng.Uniform();
    std::sort(t.begin(), t.end());
    const double f_signal = 0.2 + rng.Uniform();
    for (size_t i = 0; i < t.size(); ++i) {
      dy[i] = 0.1 + 0.2 * rng.Uniform();
      y[i] = std::sin(2 * M_PI * f_signal * t[i]) + dy[i] * (2 * rng.Uniform() - 1);
    }
    builder.AddSeries(t, y, dy);
  }
  v1::FrequencyGrid grid;
  if (p.frequencies >= 2) {
    ASSIGN_OR_RETURN(grid, client::RangeGrid(0.01, 5.0, p.frequencies));
  } else {
    grid = client::UniformGrid(0.5, 0.01, p.frequencies);
  }
  builder.SetGrid(grid).SetDType(dtype).SetSeriesDType(dtype);
  v1::SubmitRequest request;
  ASSIGN_OR_RETURN(*request.mutable_periodogram(), builder.Build());
  request.mutable_periodogram()->set_top_k(p.top_k);
  return request;
}

absl::StatusOr<v1::SubmitRequest> MakeDense(const DenseParams& p, const std::string& model,
                                            uint64_t seed) {
  FastRng rng(seed);
  const std::vector<float> x = UniformFloats(p.rows * p.in_features, 1.7f, rng);
  v1::SubmitRequest request;
  ASSIGN_OR_RETURN(*request.mutable_dense(),
                   client::MakeDenseRequest(model, x, p.rows, p.in_features, p.model_dtype));
  return request;
}

absl::StatusOr<v1::SubmitRequest> MakeAssimilate(const AssimilateParams& a, v1::DType dtype,
                                                 uint64_t seed) {
  FastRng rng(seed);
  v1::SubmitRequest request;
  v1::AssimilateRequest* assimilate = request.mutable_assimilate();
  assimilate->set_dtype(dtype);
  for (int64_t k = 0; k < a.problems; ++k) {
    client::AssimilationProblem p;
    p.n = a.n;
    p.m = a.m;
    p.members = a.members;
    p.method = a.method;
    p.x.resize(static_cast<size_t>(a.n * a.members));
    for (int64_t i = 0; i < a.n; ++i) {
      for (int64_t j = 0; j < a.members; ++j) {
        p.x[i * a.members + j] = std::sin(0.1 * static_cast<double>(i)) + (2 * rng.Uniform() - 1);
      }
    }
    // H observes state variable i % n.
    p.hx.resize(static_cast<size_t>(a.m * a.members));
    p.y.resize(static_cast<size_t>(a.m));
    for (int64_t i = 0; i < a.m; ++i) {
      double mean = 0;
      for (int64_t j = 0; j < a.members; ++j) {
        p.hx[i * a.members + j] = p.x[(i % a.n) * a.members + j];
        mean += p.hx[i * a.members + j];
      }
      p.y[i] = mean / static_cast<double>(a.members) + (2 * rng.Uniform() - 1);
    }
    p.obs_error.assign(static_cast<size_t>(a.m), 0.5);
    if (a.method == v1::ASSIMILATION_METHOD_ENKF) p.seed = rng.Next();
    ASSIGN_OR_RETURN(*assimilate->add_problems(), client::MakeAssimilationProblem(p, dtype));
  }
  return request;
}

}  // namespace

const char* UnaryMethod(Op op) {
  switch (op) {
    case Op::kPeriodogram: return "/gpucompute.v1.Compute/Periodogram";
    case Op::kDense: return "/gpucompute.v1.Compute/Dense";
    case Op::kAssimilate: return "/gpucompute.v1.Compute/Assimilate";
    case Op::kEcho: return "/gpucompute.v1.Compute/Echo";
  }
  return "";
}

JobPicker::JobPicker(std::vector<double> weights, std::vector<std::vector<int>> entries)
    : entries_(std::move(entries)) {
  double total = 0;
  for (double w : weights) total += w;
  double sum = 0;
  for (double w : weights) {
    sum += w;
    cumulative_.push_back(sum / total);
  }
  // Rounding must not leave a gap below 1 (Uniform() < 1): the last entry that can be picked
  // ends at exactly 1, and so does everything after it.
  for (size_t i = weights.size(); i-- > 0;) {
    cumulative_[i] = 1.0;
    if (weights[i] > 0) break;
  }
}

int JobPicker::Pick(FastRng& rng) const {
  size_t entry = 0;
  if (cumulative_.size() > 1) {
    const double u = rng.Uniform();
    entry = static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) -
                                cumulative_.begin());
    entry = std::min(entry, cumulative_.size() - 1);
  }
  const std::vector<int>& jobs = entries_[entry];
  return jobs.size() == 1 ? jobs[0] : jobs[rng.Next() % jobs.size()];
}

std::vector<JobSize> Workload::sizes() const {
  std::vector<JobSize> out;
  out.reserve(jobs.size());
  for (const Job& j : jobs) {
    out.push_back({j.size.request_bytes * split, j.size.payload_bytes * split});
  }
  return out;
}

double Workload::MeanPayloadBytes() const {
  double mean = 0;
  for (int e = 0; e < picker.entries(); ++e) {
    const std::vector<int>& jobs_of = picker.jobs_of(e);
    if (jobs_of.empty()) continue;
    double bytes = 0;
    for (int j : jobs_of) bytes += static_cast<double>(jobs[j].size.payload_bytes);
    mean += picker.probability(e) * bytes / static_cast<double>(jobs_of.size());
  }
  return mean * split;
}

absl::StatusOr<client::ModelUpload> MakeDenseModel(const DenseParams& params,
                                                   const std::string& name, uint64_t seed) {
  FastRng rng(seed);
  client::ModelBuilder builder(name);
  builder.SetDType(params.model_dtype)
      .SetWireDType(params.model_dtype == v1::FLOAT32 ? v1::FLOAT32 : params.model_dtype);
  int64_t in = params.in_features;
  for (int64_t l = 0; l < params.layers; ++l) {
    client::DenseLayer layer;
    layer.in_features = in;
    layer.out_features = params.out_features;
    // Variance 1/in keeps activations of order one through the stack.
    layer.weight = UniformFloats(in * params.out_features,
                                 static_cast<float>(std::sqrt(3.0 / static_cast<double>(in))), rng);
    layer.bias = UniformFloats(params.out_features, 0.1f, rng);
    layer.layernorm = true;
    layer.activation = v1::ACTIVATION_GELU_TANH;
    builder.AddLayer(std::move(layer));
    in = params.out_features;
  }
  return builder.Build();
}

absl::StatusOr<v1::SubmitRequest> MakeRequest(Op op, const WorkloadConfig& config,
                                              const std::string& model_name, uint64_t seed) {
  switch (op) {
    case Op::kPeriodogram: return MakePeriodogram(config.periodogram, config.dtype, seed);
    case Op::kDense: return MakeDense(config.dense, model_name, seed);
    case Op::kAssimilate: return MakeAssimilate(config.assimilate, config.dtype, seed);
    case Op::kEcho: {
      // --split: each part carries bytes / split (rounded up).
      const int64_t parts = std::max(1, config.echo.split);
      return MakeEchoRequest((config.echo.bytes + parts - 1) / parts, config.echo.discard, seed);
    }
  }
  return absl::InternalError("unknown op");
}

v1::SubmitRequest MakeEchoRequest(int64_t bytes, bool discard, uint64_t seed) {
  FastRng rng(seed);
  v1::SubmitRequest request;
  v1::EchoRequest* echo = request.mutable_echo();
  echo->set_discard(discard);
  v1::Tensor* t = echo->mutable_tensor();
  t->set_dtype(v1::UINT8);
  t->add_shape(bytes);
  std::string* data = t->mutable_data();
  data->resize(static_cast<size_t>(bytes));
  size_t i = 0;
  for (; i + 8 <= data->size(); i += 8) {
    const uint64_t r = rng.Next();
    std::memcpy(data->data() + i, &r, 8);
  }
  for (; i < data->size(); ++i) (*data)[i] = static_cast<char>(rng.Next());
  return request;
}

int64_t InputTensorBytes(v1::SubmitRequest& request) {
  int64_t bytes = 0;
  ForEachInputTensor(request, [&](v1::Tensor& t) {
    if (t.has_shared_memory()) {
      bytes += t.shared_memory().length();
    } else if (t.payload_case() == v1::Tensor::kHandle) {
      absl::StatusOr<int64_t> n = client::NumElements(t.shape());
      if (n.ok()) bytes += *n * client::DTypeSize(t.dtype());
    } else {
      bytes += static_cast<int64_t>(t.data().size());
    }
  });
  return bytes;
}

int64_t OutputBytesBound(const v1::SubmitRequest& request, int64_t dense_out_bytes_per_row) {
  int64_t bytes = 0;
  switch (request.job_case()) {
    case v1::SubmitRequest::kPeriodogram: {
      const v1::PeriodogramRequest& p = request.periodogram();
      const int64_t size = p.dtype() == v1::FLOAT32 ? 4 : 8;
      for (const v1::Series& s : p.series()) {
        const int64_t n = s.has_frequency() ? GridSize(s.frequency()) : GridSize(p.frequency());
        bytes += Align64(n * size) + 64;
      }
      bytes += p.packed_series().lengths_size() * (Align64(GridSize(p.frequency()) * size) + 64);
      break;
    }
    case v1::SubmitRequest::kDense: {
      int64_t rows = request.dense().input().shape_size() > 0 ? request.dense().input().shape(0) : 0;
      bytes += Align64(rows * dense_out_bytes_per_row) + 64;
      break;
    }
    case v1::SubmitRequest::kAssimilate: {
      const int64_t size = request.assimilate().dtype() == v1::FLOAT32 ? 4 : 8;
      for (const v1::AssimilationProblem& p : request.assimilate().problems()) {
        const int64_t nx = p.x().shape_size() == 2 ? p.x().shape(0) * p.x().shape(1) : 0;
        const int64_t m = p.y().shape_size() == 1 ? p.y().shape(0) : 0;
        bytes += Align64(nx * size) + Align64(m * 8) + 128;
      }
      break;
    }
    case v1::SubmitRequest::kEcho:
      if (!request.echo().discard()) {
        int64_t n = 1;
        for (int64_t d : request.echo().tensor().shape()) n *= d;
        bytes += Align64(n * client::DTypeSize(request.echo().tensor().dtype())) + 64;
      }
      break;
    case v1::SubmitRequest::JOB_NOT_SET:
      break;
  }
  return bytes;
}

void SetOutputPlacement(v1::SubmitRequest& request, const v1::OutputPlacement& placement) {
  switch (request.job_case()) {
    case v1::SubmitRequest::kPeriodogram:
      *request.mutable_periodogram()->mutable_output_placement() = placement;
      break;
    case v1::SubmitRequest::kDense:
      *request.mutable_dense()->mutable_output_placement() = placement;
      break;
    case v1::SubmitRequest::kAssimilate:
      *request.mutable_assimilate()->mutable_output_placement() = placement;
      break;
    case v1::SubmitRequest::kEcho:
      *request.mutable_echo()->mutable_output_placement() = placement;
      break;
    case v1::SubmitRequest::JOB_NOT_SET:
      break;
  }
}

Job Serialize(Op op, const v1::SubmitRequest& request, int64_t payload_bytes) {
  Job job;
  job.op = op;
  const google::protobuf::Message* inner = nullptr;
  switch (request.job_case()) {
    case v1::SubmitRequest::kPeriodogram: inner = &request.periodogram(); break;
    case v1::SubmitRequest::kDense: inner = &request.dense(); break;
    case v1::SubmitRequest::kAssimilate: inner = &request.assimilate(); break;
    case v1::SubmitRequest::kEcho: inner = &request.echo(); break;
    case v1::SubmitRequest::JOB_NOT_SET: inner = &request; break;
  }
  job.request = SerializeToSlice(*inner);
  job.submit = SerializeToSlice(request);
  job.size.request_bytes = static_cast<int64_t>(job.request.size());
  job.size.payload_bytes = payload_bytes;
  return job;
}

}  // namespace gpucompute::load
