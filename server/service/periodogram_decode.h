// Decodes and validates a PeriodogramRequest into the typed periodogram::Request the
// scheduler takes. Bad input is INVALID_ARGUMENT naming the field path and rule; a request
// over a limit is RESOURCE_EXHAUSTED naming the limit.
#pragma once

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/periodogram/periodogram.h"
#include "server/service/limits.h"

namespace gpucompute {

absl::StatusOr<periodogram::Request> DecodePeriodogramRequest(const v1::PeriodogramRequest& request,
                                                              const ServiceLimits& limits);

}  // namespace gpucompute
