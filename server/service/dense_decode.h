// Decodes and validates a DenseRequest against the registry's models: NOT_FOUND for an
// unknown model, INVALID_ARGUMENT naming both sizes for a wrong feature count or dtype,
// RESOURCE_EXHAUSTED over the row or response-size limits.
#pragma once

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/dense/dense.h"
#include "server/runtime/model_registry.h"
#include "server/service/limits.h"

namespace gpucompute {

// The returned Request views `request`'s input bytes: `request` must outlive it.
absl::StatusOr<dense::Request> DecodeDenseRequest(const v1::DenseRequest& request,
                                                  const ModelRegistry& models,
                                                  const ServiceLimits& limits);

}  // namespace gpucompute
