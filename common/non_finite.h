// Finding NaN and infinities in arrays of IEEE values, at memory speed: every element's
// exponent bits tested without branches (vectorised), large arrays in blocks on several threads.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/element_type.h"

namespace gpucompute {

// Index of the first NaN or infinity among the whole elements of `type` in `bytes` (a trailing
// partial element is ignored), or -1 when there is none.
int64_t FirstNonFinite(ElementType type, absl::string_view bytes);

}  // namespace gpucompute
