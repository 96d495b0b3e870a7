// PeriodogramColumns: a periodogram's results, besides the powers and models, as one tensor per
// field with a row per series (PeriodogramRequest.result_columns). A survey's thousands of
// results then cost a client a few array decodes instead of thousands of messages.
#pragma once

#include <vector>

#include "gpucompute/v1/compute.pb.h"
#include "server/ops/periodogram/periodogram.h"

namespace gpucompute {

// Fills `out` from the finished results of `request` (FinishResults done: one per caller's
// series, with their peaks and false-alarm values).
void EncodePeriodogramColumns(const periodogram::Request& request,
                              const std::vector<periodogram::SeriesPower>& results,
                              v1::PeriodogramColumns* out);

}  // namespace gpucompute
