// Decodes and validates a PeriodogramRequest into the typed periodogram::Request the
// scheduler takes. Bad input is INVALID_ARGUMENT naming the field path and rule; a request
// over a limit is RESOURCE_EXHAUSTED naming the limit.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/periodogram/periodogram.h"
#include "server/service/limits.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

// Tensors are resolved by `resolver` (null: inline only) and copied into the Request, which
// views nothing afterwards. With outputs placed off the response, the response-size limit does
// not apply. Where the resolver's context has a server memory budget, the decoded inputs and
// the outputs are leased from it before they are allocated, into `leases` (the caller holds
// them until the request is answered).
absl::StatusOr<periodogram::Request> DecodePeriodogramRequest(const v1::PeriodogramRequest& request,
                                                              const ServiceLimits& limits,
                                                              TensorResolver* resolver = nullptr,
                                                              std::vector<MemoryLease>* leases = nullptr);

}  // namespace gpucompute
