// Deadlines and timings (see call_timing.h).
#include "server/service/call_timing.h"

#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/trace_context.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

absl::Time ToAbslTime(std::chrono::system_clock::time_point tp) {
  if (tp == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(tp);
}

void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start) {
  context->AddTrailingMetadata("x-gpucompute-decode-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.decode)));
  context->AddTrailingMetadata("x-gpucompute-queue-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.queue)));
  context->AddTrailingMetadata("x-gpucompute-compute-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.compute)));
  context->AddTrailingMetadata("x-gpucompute-total-us",
                               absl::StrCat(absl::ToInt64Microseconds(absl::Now() - start)));
  context->AddTrailingMetadata("x-gpucompute-batch-requests", absl::StrCat(t.batch_requests));
}

absl::Status RecordedStatus(const absl::Status& status, bool cancelled, absl::Time deadline) {
  if (!cancelled || absl::Now() >= deadline) return status;
  if (status.ok()) return absl::CancelledError("cancelled by the client (its results were ready)");
  return absl::CancelledError(absl::StrCat("cancelled by the client (", status.message(), ")"));
}

void RecordCallEnd(const ServiceParts& parts, const grpc::CallbackServerContext& context,
                   absl::string_view op, const absl::Status& status, const JobTimings& timings,
                   absl::Time start) {
  // Queue and compute time are recorded by the schedulers, per request they run.
  const absl::Duration total = absl::Now() - start;
  if (parts.metrics != nullptr) parts.metrics->RecordCall(op, status.code(), total);
  if (parts.call_log == CallLog::kNone || (status.ok() && parts.call_log != CallLog::kAll)) return;
  std::optional<TraceParent> trace;
  if (auto it = context.client_metadata().find(kTraceParentKey); it != context.client_metadata().end()) {
    trace = ParseTraceParent(absl::string_view(it->second.data(), it->second.size()));
  }
  ScopedLogTrace scope(trace ? &*trace : nullptr);
  spdlog::log(status.ok() ? spdlog::level::info : spdlog::level::warn,
              "call {} {} {:.3f} ms (queue {:.3f}, compute {:.3f}) caller {}{}{}{}", std::string(op),
              absl::StatusCodeToString(status.code()), absl::ToDoubleMilliseconds(total),
              absl::ToDoubleMilliseconds(timings.queue), absl::ToDoubleMilliseconds(timings.compute),
              CallerId(context),
              trace ? absl::StrCat(" trace_id ", trace->trace_id, " span_id ", trace->parent_id) : "",
              status.ok() ? "" : ": ", std::string(status.message()));
}

}  // namespace gpucompute
