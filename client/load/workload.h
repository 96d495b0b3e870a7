// Workload generation: random inputs for each operation (made once, before the run, with the
// client library's builders), the dense model the tool loads, the Echo "twin" of a job (same
// input bytes) for --compare-echo, and the weighted picker that chooses each request's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/client.h"
#include "client/load/config.h"
#include "client/load/stats.h"
#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/support/slice.h"

namespace gpucompute::load {

// Full gRPC method name of an op's unary RPC ("/gpucompute.v1.Compute/Periodogram").
const char* UnaryMethod(Op op);
inline constexpr char kSubmitMethod[] = "/gpucompute.v1.Compute/Submit";

// One request as it goes on the wire, serialized once.
struct Job {
  Op op = Op::kEcho;
  grpc::Slice request;  // the unary request message
  grpc::Slice submit;   // the SubmitRequest carrying it, without id (wire.h adds one per send)
  JobSize size;
};

// splitmix64: a small, fast generator for picking jobs on the hot path.
class FastRng {
 public:
  explicit FastRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

// Chooses a job: an entry with probability weight / sum of weights, then one of its jobs
// (variants) uniformly.
class JobPicker {
 public:
  // entries[i] lists the job indices of entry i; weights[i] >= 0, not all zero, and an entry
  // with positive weight has at least one job.
  JobPicker(std::vector<double> weights, std::vector<std::vector<int>> entries);
  int Pick(FastRng& rng) const;
  int entries() const { return static_cast<int>(entries_.size()); }
  const std::vector<int>& jobs_of(int entry) const { return entries_[entry]; }
  double probability(int entry) const {
    return cumulative_[entry] - (entry == 0 ? 0.0 : cumulative_[entry - 1]);
  }

 private:
  std::vector<double> cumulative_;  // normalised to end at 1
  std::vector<std::vector<int>> entries_;
};

// The serialized jobs of a run and how to pick among them.
struct Workload {
  std::string name;             // "periodogram", "mix", "echo" ...
  std::vector<Job> jobs;
  std::vector<Op> entry_ops;    // the op of each picker entry
  JobPicker picker{{1.0}, {{0}}};
  // Each request is this many calls of the picked job at once, on different lanes (channels or
  // streams), complete when all are: a large Echo split into parts (--split).
  int split = 1;

  // Sizes of whole requests (a job's times split).
  std::vector<JobSize> sizes() const;
  // Mean payload (input tensor) bytes per request, weighted as picked.
  double MeanPayloadBytes() const;
};

// ---------------------------------------------------------------- typed requests

// The dense model gpucompute-load loads: `layers` layers (in -> out, then out -> out), each with
// LayerNorm, bias and GELU(tanh), random weights (seeded), uploaded in the model's dtype.
absl::StatusOr<client::ModelUpload> MakeDenseModel(const DenseParams& params,
                                                   const std::string& name, uint64_t seed);

// One random request of `op` (the job set in a SubmitRequest, id unset), seeded. An Echo carries
// config.echo.bytes / config.echo.split bytes (one part).
absl::StatusOr<v1::SubmitRequest> MakeRequest(Op op, const WorkloadConfig& config,
                                              const std::string& model_name, uint64_t seed);

// An Echo of `bytes` random UINT8 bytes.
v1::SubmitRequest MakeEchoRequest(int64_t bytes, bool discard, uint64_t seed);

// Calls fn on every input tensor of the request's job.
template <typename Fn>
void ForEachInputTensor(v1::SubmitRequest& request, Fn&& fn);

// Bytes of the job's input tensors (inline data, or the length they name).
int64_t InputTensorBytes(v1::SubmitRequest& request);

// `n` rounded up to a multiple of 64: where each tensor starts in a shared-memory region, the
// load tester's inputs (SharedMemoryRegion::Allocate) as the server's outputs.
inline int64_t Align64(int64_t n) { return (n + 63) / 64 * 64; }

// An upper bound of the bytes the job's outputs take in a shared-memory output area (each
// output 64-byte aligned). `dense_out_bytes_per_row` is the loaded model's output row size.
int64_t OutputBytesBound(const v1::SubmitRequest& request, int64_t dense_out_bytes_per_row);

// Sets the job's output placement.
void SetOutputPlacement(v1::SubmitRequest& request, const v1::OutputPlacement& placement);

// Serializes a finished request into a Job.
Job Serialize(Op op, const v1::SubmitRequest& request, int64_t payload_bytes);

// ---------------------------------------------------------------- template definitions

template <typename Fn>
void ForEachInputTensor(v1::SubmitRequest& request, Fn&& fn) {
  switch (request.job_case()) {
    case v1::SubmitRequest::kPeriodogram:
      for (v1::Series& s : *request.mutable_periodogram()->mutable_series()) {
        if (s.has_t()) fn(*s.mutable_t());
        if (s.has_y()) fn(*s.mutable_y());
        if (s.has_dy()) fn(*s.mutable_dy());
      }
      if (request.periodogram().has_packed_series()) {
        v1::PackedSeries& p = *request.mutable_periodogram()->mutable_packed_series();
        if (p.has_t()) fn(*p.mutable_t());
        if (p.has_y()) fn(*p.mutable_y());
        if (p.has_dy()) fn(*p.mutable_dy());
      }
      break;
    case v1::SubmitRequest::kDense:
      if (request.dense().has_input()) fn(*request.mutable_dense()->mutable_input());
      break;
    case v1::SubmitRequest::kAssimilate:
      for (v1::AssimilationProblem& p : *request.mutable_assimilate()->mutable_problems()) {
        for (v1::Tensor* t : {p.mutable_x(), p.mutable_hx(), p.mutable_y()}) fn(*t);
        if (p.has_obs_error_variance()) fn(*p.mutable_obs_error_variance());
        if (p.has_obs_error_covariance()) fn(*p.mutable_obs_error_covariance());
        if (p.has_perturbations()) fn(*p.mutable_perturbations());
      }
      break;
    case v1::SubmitRequest::kEcho:
      if (request.echo().has_tensor()) fn(*request.mutable_echo()->mutable_tensor());
      break;
    case v1::SubmitRequest::JOB_NOT_SET:
      break;
  }
}

}  // namespace gpucompute::load
