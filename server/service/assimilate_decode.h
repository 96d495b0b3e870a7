// Decodes and validates an AssimilateRequest: INVALID_ARGUMENT naming the problem, the field
// and the rule ("problems[2].hx.shape[1] is 9 but x.shape[1] (members) is 10"), RESOURCE_EXHAUSTED over
// a limit. Each problem's form is resolved here (never kAuto afterwards).
#pragma once

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/assimilate/assimilate.h"
#include "server/service/limits.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

// The returned Request views the tensors' bytes (in `request`, resident tensors or shared-memory
// regions, resolved by `resolver`; null: inline only): `request` and the resolver's pins must
// outlive it. With outputs placed off the response, the response-size limit does not apply.
absl::StatusOr<assimilate::Request> DecodeAssimilateRequest(const v1::AssimilateRequest& request,
                                                            const ServiceLimits& limits,
                                                            TensorResolver* resolver = nullptr);

}  // namespace gpucompute
