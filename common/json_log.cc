// JSON log lines (see json_log.h).
#include "common/json_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "common/trace_context.h"

namespace gpucompute {

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time), absl::UTCTimeZone());
  const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
  const std::string text(msg.payload.data(), msg.payload.size());
  std::string line = absl::StrCat(
      R"({"time":")", time, R"(","level":")", std::string(level.data(), level.size()),
      R"(","thread":)", msg.thread_id);
  if (worker_ >= 0) absl::StrAppend(&line, R"(,"worker":)", worker_);
  if (const TraceParent* trace = CurrentLogTrace()) {  // hex digits only: nothing to escape
    absl::StrAppend(&line, R"(,"trace_id":")", trace->trace_id, R"(","span_id":")",
                    trace->parent_id, R"(","trace_flags":")", trace->flags & 1 ? "01" : "00", "\"");
  }
  absl::StrAppend(&line, R"(,"msg":)",
                  nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "}\n");
  dest.append(line.data(), line.data() + line.size());
}

}  // namespace gpucompute
