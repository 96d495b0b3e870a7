// Decodes and validates a DenseRequest against the registry's models: NOT_FOUND for an
// unknown model, INVALID_ARGUMENT naming both sizes for a wrong feature count or dtype,
// RESOURCE_EXHAUSTED over the row or response-size limits.
#pragma once

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/dense/dense.h"
#include "server/runtime/model_registry.h"
#include "server/service/limits.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

// The returned Request views the input's bytes (in `request`, a resident tensor or a shared-
// memory region, resolved by `resolver`; null: inline only): `request` and the resolver's pins
// must outlive it. With outputs placed off the response, the response-size limit does not apply.
absl::StatusOr<dense::Request> DecodeDenseRequest(const v1::DenseRequest& request,
                                                  const ModelRegistry& models,
                                                  const ServiceLimits& limits,
                                                  TensorResolver* resolver = nullptr);

}  // namespace gpucompute
