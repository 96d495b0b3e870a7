// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr (Debian's Abseil
// 20220623 ships neither).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUCOMPUTE_CONCAT_INNER(a, b) a##b
#define GPUCOMPUTE_CONCAT(a, b) GPUCOMPUTE_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                       \
  do {                                              \
    ::absl::Status _gpucompute_status = (expr);     \
    if (!_gpucompute_status.ok()) return _gpucompute_status; \
  } while (0)

#define GPUCOMPUTE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(tmp).value()

// ASSIGN_OR_RETURN(auto x, MakeX());
#define ASSIGN_OR_RETURN(lhs, expr) \
  GPUCOMPUTE_ASSIGN_OR_RETURN_IMPL(GPUCOMPUTE_CONCAT(_gpucompute_or_, __LINE__), lhs, expr)
