// One call of an operation, however it arrived: a unary RPC or a job on a Submit stream.
// Each Run* decodes and validates the request, hands it to its scheduler and fills the
// response before calling `done`; the carrier (compute_service.cc, submit_reactor.cc) only
// turns the status and timings into its own reply.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/op_schedulers.h"
#include "server/service/service_parts.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

// What a call brings besides its request.
struct CallContext {
  absl::Time start;                            // receipt
  absl::Time deadline = absl::InfiniteFuture();
  std::function<bool()> is_cancelled;          // polled before dispatch; may be empty
  std::string client;                          // the caller (owner of resident tensors)
};

// The resident tensors and shared-memory regions a call may use: the caller's own.
inline TensorContext TensorContextOf(const ServiceParts& parts, const CallContext& call) {
  return TensorContext{parts.tensors, parts.shared_memory, call.client, parts.memory};
}

// Called exactly once: inline when the request is rejected before it is queued, else from a
// completion thread. The response is complete when the status is OK, and may be partly
// filled otherwise.
using CallDone = std::function<void(const absl::Status& status, const JobTimings& timings)>;

// `request` and `response` must stay alive until `done` has been called. Inputs may be inline,
// resident (by handle) or in shared memory; outputs go where the request's output_placement
// says (PlaceOutputs), after the operation has filled them.
void RunPeriodogram(const ServiceParts& parts, const v1::PeriodogramRequest& request,
                    v1::PeriodogramResponse* response, CallContext call, CallDone done);
void RunDense(const ServiceParts& parts, const v1::DenseRequest& request,
              v1::DenseResponse* response, CallContext call, CallDone done);
void RunAssimilate(const ServiceParts& parts, const v1::AssimilateRequest& request,
                   v1::AssimilateResponse* response, CallContext call, CallDone done);
void RunEcho(const ServiceParts& parts, const v1::EchoRequest& request, v1::EchoResponse* response,
             CallContext call, CallDone done);

}  // namespace gpucompute
