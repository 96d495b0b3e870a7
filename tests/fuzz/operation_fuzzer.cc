// libFuzzer target: arbitrary bytes as a SubmitRequest, run to the end as the server runs it
// (RunPeriodogram, RunDense, RunAssimilate, RunEcho: decode, the scheduler, the CPU backend,
// the results encoded and placed), against the environment of fuzz_env.h with its resident
// tensors, registered shared-memory region and models. Every output placement is reached
// (inline, keep, keep_above_bytes, discard, shared memory, by the request's own bytes). A
// status other than OK or a client-error code, a sanitizer report, an output that is not
// where its placement says with the bytes its shape needs, or a memory-budget lease left
// behind is a finding.
//
// Work is bounded below the server's defaults (pairs, frequencies, bootstrap samples, rows),
// so that one input runs in milliseconds on one CPU thread; request_fuzzer covers decoding
// at the defaults.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gpucompute/v1/compute.pb.h"
#include "common/byte_range.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/op_schedulers.h"
#include "server/service/operation_calls.h"
#include "server/service/service_parts.h"
#include "server/service/tensor_codec.h"
#include "tests/fuzz/fuzz_env.h"

namespace gpucompute::fuzz {
namespace {

// The CPU backend, its completion thread and the three schedulers, over GetEnv()'s registries.
struct Operations {
  CompletionQueue completions{1};
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PeriodogramScheduler> periodogram;
  std::unique_ptr<DenseScheduler> dense;
  std::unique_ptr<AssimilateScheduler> assimilate;
  ServiceParts parts;
};

Operations& GetOperations() {
  static Operations* ops = [] {
    Env& env = GetEnv();
    auto* o = new Operations;
    BackendOptions backend;
    backend.kind = "cpu";
    backend.cpu_threads = 1;
    auto created = CreateBackend(backend, &o->completions);
    if (!created.ok()) std::abort();
    o->backend = *std::move(created);
    o->periodogram = std::make_unique<PeriodogramScheduler>(o->backend.get(), SchedulerOptions{});
    o->dense = std::make_unique<DenseScheduler>(o->backend.get(), SchedulerOptions{});
    o->assimilate = std::make_unique<AssimilateScheduler>(o->backend.get(), SchedulerOptions{});
    ServiceParts& p = o->parts;
    p.backend = o->backend.get();
    p.periodogram = o->periodogram.get();
    p.dense = o->dense.get();
    p.assimilate = o->assimilate.get();
    p.models = env.models.get();
    p.tensors = env.store.get();
    p.shared_memory = env.shared_memory.get();
    p.memory = env.memory.get();
    p.limits = env.limits;
    p.limits.max_pairs_per_request = int64_t{1} << 22;
    p.limits.max_frequencies_per_series = int64_t{1} << 16;
    p.limits.max_bootstrap_samples = int64_t{1} << 16;
    p.limits.dense.max_rows_per_request = 4096;
    return o;
  }();
  return *ops;
}

// Runs `run(parts, request, response, call, done)` and waits for its `done`.
template <typename Request, typename Response, typename Run>
absl::Status RunToTheEnd(const Request& request, Response* response, Run run) {
  absl::Notification finished;
  absl::Status status;
  CallContext call;
  call.start = absl::Now();
  call.deadline = call.start + absl::Seconds(5);
  call.client = kClient;
  run(GetOperations().parts, request, response, std::move(call),
      [&](const absl::Status& s, const JobTimings&) {
        status = s;
        finished.Notify();
      });
  finished.WaitForNotification();
  return status;
}

// An output of an OK call is where `placement` says, holding the bytes its dtype and shape
// need; a kept one is then deleted (the quota would fill run after run).
void CheckPlaced(const v1::OutputPlacement& placement, const v1::Tensor& t,
                 const google::protobuf::Message& request) {
  Env& env = GetEnv();
  int64_t count = 1;
  for (int64_t d : t.shape()) count *= d;
  const int64_t bytes = count * DTypeSize(t.dtype());
  FUZZ_CHECK(bytes >= 0 && DTypeSize(t.dtype()) > 0, "output dtype and shape");
  if (placement.discard()) {
    FUZZ_CHECK(t.payload_case() == v1::Tensor::PAYLOAD_NOT_SET, "discarded output has no payload");
    return;
  }
  const bool kept =
      (placement.target_case() == v1::OutputPlacement::kKeep && placement.keep()) ||
      (placement.target_case() == v1::OutputPlacement::kKeepAboveBytes &&
       bytes > placement.keep_above_bytes());
  if (placement.has_shared_memory()) {
    FUZZ_CHECK(t.has_shared_memory(), "output in the region");
    const v1::SharedMemoryRef& ref = t.shared_memory();
    FUZZ_CHECK(ref.region() == placement.shared_memory().region(), "output's region");
    FUZZ_CHECK(ref.length() == bytes, "output's length");
    FUZZ_CHECK(ref.offset() >= 0 && ref.offset() <= kRegionBytes - bytes, "output inside the region");
  } else if (kept) {
    FUZZ_CHECK(t.has_handle(), "kept output has a handle");
    auto resident = env.store->Acquire(kClient, t.handle());
    FUZZ_CHECK(resident.ok() && (*resident)->bytes() == bytes, "kept output is resident, whole");
    (void)env.store->Delete(kClient, t.handle());
  } else {
    FUZZ_CHECK(t.payload_case() == v1::Tensor::kData && static_cast<int64_t>(t.data().size()) == bytes,
               "inline output holds its bytes");
  }
}

void Periodogram(const v1::PeriodogramRequest& request) {
  v1::PeriodogramResponse response;
  const absl::Status status = RunToTheEnd(request, &response, RunPeriodogram);
  CheckStatus(status, request);
  if (!status.ok()) return;
  const int series = request.series_size() + request.packed_series().lengths_size();
  FUZZ_CHECK(response.results_size() == series, "a result per series, packed ones included");
  for (const v1::SeriesResult& r : response.results()) {
    CheckPlaced(request.output_placement(), r.power(), request);
  }
  FUZZ_CHECK(response.has_columns() == request.result_columns(), "columns when asked for");
  if (request.result_columns()) {
    FUZZ_CHECK(response.columns().peak_index().shape_size() == 1 &&
                   response.columns().peak_index().shape(0) == series,
               "a column row per series");
  }
}

void Dense(const v1::DenseRequest& request) {
  v1::DenseResponse response;
  const absl::Status status = RunToTheEnd(request, &response, RunDense);
  CheckStatus(status, request);
  if (status.ok()) CheckPlaced(request.output_placement(), response.output(), request);
}

void Assimilate(const v1::AssimilateRequest& request) {
  v1::AssimilateResponse response;
  const absl::Status status = RunToTheEnd(request, &response, RunAssimilate);
  CheckStatus(status, request);
  if (!status.ok()) return;
  FUZZ_CHECK(response.results_size() == request.problems_size(), "a result per problem");
  for (const v1::AssimilationResult& r : response.results()) {
    CheckPlaced(request.output_placement(), r.analysis(), request);
    CheckPlaced(request.output_placement(), r.innovation_mean(), request);
  }
}

void Echo(const v1::EchoRequest& request) {
  v1::EchoResponse response;
  const absl::Status status = RunToTheEnd(request, &response, RunEcho);
  CheckStatus(status, request);
  if (status.ok() && !request.discard()) CheckPlaced(request.output_placement(), response.tensor(), request);
}

}  // namespace
}  // namespace gpucompute::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpucompute::fuzz;
  return FuzzSubmitRequest(data, size, {Periodogram, Dense, Assimilate, Echo});
}
