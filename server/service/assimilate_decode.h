// Decodes and validates an AssimilateRequest: INVALID_ARGUMENT naming the problem, the field
// and the rule ("problems[2].hx.shape[1] is 9 but x.shape[1] (members) is 10"), RESOURCE_EXHAUSTED over
// a limit. Each problem's form is resolved here (never kAuto afterwards).
#pragma once

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/assimilate/assimilate.h"
#include "server/service/limits.h"

namespace gpucompute {

// The returned Request views `request`'s tensor bytes: `request` must outlive it.
absl::StatusOr<assimilate::Request> DecodeAssimilateRequest(const v1::AssimilateRequest& request,
                                                            const ServiceLimits& limits);

}  // namespace gpucompute
