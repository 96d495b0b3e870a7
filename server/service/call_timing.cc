// Deadlines and timings (see call_timing.h).
#include "server/service/call_timing.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gpucompute {

absl::Time ToAbslTime(std::chrono::system_clock::time_point tp) {
  if (tp == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(tp);
}

void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start) {
  context->AddTrailingMetadata("x-gpucompute-queue-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.queue)));
  context->AddTrailingMetadata("x-gpucompute-compute-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.compute)));
  context->AddTrailingMetadata("x-gpucompute-total-us",
                               absl::StrCat(absl::ToInt64Microseconds(absl::Now() - start)));
  context->AddTrailingMetadata("x-gpucompute-batch-requests", absl::StrCat(t.batch_requests));
}

}  // namespace gpucompute
