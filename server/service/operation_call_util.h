// The part of RunPeriodogram, RunDense and RunAssimilate that does not depend on the
// operation: decoding under an NVTX range with the output placement checked, and handing the
// decoded request to its scheduler with the call's deadline and cancellation.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/nvtx.h"
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute::internal {

// Runs `decode()` (an absl::StatusOr<T> over `resolver`) in the NVTX range `range` (a string
// literal), then checks `placement` against the resolver's context. On either error calls
// `done(status, {})` and returns nullopt: the call is over.
template <typename Decode>
auto DecodeCall(const char* range, const TensorResolver& resolver,
                const v1::OutputPlacement& placement, const CallDone& done, Decode decode)
    -> std::optional<typename decltype(decode())::value_type> {
  decltype(decode()) decoded;
  {
    NVTX_RANGE(range);
    decoded = decode();
  }
  if (decoded.ok()) {
    if (absl::Status s = CheckOutputPlacement(resolver.context(), placement); !s.ok()) {
      decoded = s;
    }
  }
  if (!decoded.ok()) {
    done(decoded.status(), JobTimings{});
    return std::nullopt;
  }
  return *std::move(decoded);
}

// Queues `request` on `scheduler` with `call`'s deadline and cancellation; `on_result` becomes
// the job's done, its timings with the decode (receipt to now) added. A failed Enqueue (queue
// full, shut down) is reported as `done(status, {})`, since the job's done is then never called.
template <typename Scheduler>
void EnqueueCall(Scheduler& scheduler, std::shared_ptr<const typename Scheduler::Request> request,
                 CallContext call, typename Scheduler::Done on_result, const CallDone& done) {
  typename Scheduler::Job job;
  job.request = std::move(request);
  job.deadline = call.deadline;
  job.is_cancelled = std::move(call.is_cancelled);
  job.done = [on_result = std::move(on_result), decode = absl::Now() - call.start](
                 auto result, const JobTimings& timings) {
    JobTimings with_decode = timings;
    with_decode.decode = decode;
    on_result(std::move(result), with_decode);
  };
  const absl::Status enqueued = scheduler.Enqueue(std::move(job));
  if (!enqueued.ok()) done(enqueued, JobTimings{});
}

}  // namespace gpucompute::internal
