// W3C traceparent parsing and the log lines' current trace (see trace_context.h).
#include "common/trace_context.h"

#include <algorithm>

namespace gpucompute {
namespace {

thread_local const TraceParent* log_trace = nullptr;

bool LowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool AllZero(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

int HexValue(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

}  // namespace

std::optional<TraceParent> ParseTraceParent(absl::string_view value) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters.
  constexpr size_t kLength = 55;
  if (value.size() < kLength) return std::nullopt;
  const absl::string_view version = value.substr(0, 2), trace_id = value.substr(3, 32),
                          parent_id = value.substr(36, 16), flags = value.substr(53, 2);
  if (!LowerHex(version) || version == "ff") return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  if (version == "00" ? value.size() != kLength
                      : value.size() > kLength && value[kLength] != '-') {
    return std::nullopt;
  }
  if (!LowerHex(trace_id) || AllZero(trace_id) || !LowerHex(parent_id) || AllZero(parent_id) ||
      !LowerHex(flags)) {
    return std::nullopt;
  }
  return TraceParent{std::string(trace_id), std::string(parent_id),
                     static_cast<uint8_t>(HexValue(flags[0]) * 16 + HexValue(flags[1]))};
}

const TraceParent* CurrentLogTrace() { return log_trace; }

ScopedLogTrace::ScopedLogTrace(const TraceParent* trace) : previous_(log_trace) { log_trace = trace; }

ScopedLogTrace::~ScopedLogTrace() { log_trace = previous_; }

}  // namespace gpucompute
